"""Fused CPU kernels (numba) for the stability solver's two hot spots.

The torch path in ``stability`` is the reference and the one used on GPUs. On a CPU it
spends most of its time materialising float64 copies and running many tiny batched ops;
these kernels do the same arithmetic one set at a time while the set is in cache:

- ``centred_gram``: float64 unit vectors relative to the set's first one, and their Gram
  matrix, in one pass over the float32/float64 input (no float64 copy of the whole batch);
- ``full_face_solve``: the KKT solution of the dual QP with every point on the ball
  (Gaussian elimination with partial pivoting plus one refinement step) and its duality-gap
  certificate. For a few points in general position this is usually the optimum; the sets
  where it is not (a point inside the ball, duplicates, a gap above tol) go to the torch
  solver.

``fastmath`` is limited to reassociation, so that reductions vectorise. FMA contraction is
left off: fused into x_i/|x_i| - x_0/|x_0| it would turn two identical unit vectors into
their rounding error instead of an exact zero. NaN/inf semantics are kept, since the
kernels report non-finite input instead of using it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_FASTMATH = {"reassoc"}


@nb.njit(cache=True, nogil=True, fastmath=_FASTMATH)
def centred_gram(x: np.ndarray, G: np.ndarray) -> int:
    """Fill G (B, n, n) with the Gram matrix of x_i/|x_i| - x_0/|x_0| for each set of x.

    Returns -1, or the index of the first set with a zero or non-finite norm (G is then only
    filled up to that set; the caller's careful path reports or rescales it).
    """
    B, n, d = x.shape
    buf = np.empty((n, d))
    inv = np.empty(n)
    for b in range(B):
        xb = x[b]
        for i in range(n):
            row, src = buf[i], xb[i]
            for k in range(d):
                row[k] = src[k]
        for i in range(n):
            row = buf[i]
            s = 0.0
            for k in range(d):
                s += row[k] * row[k]
            if not (s > 0.0 and s < np.inf):
                return b
            inv[i] = 1.0 / np.sqrt(s)
        r0 = buf[0]
        i0 = inv[0]
        for k in range(d):
            r0[k] *= i0
        for i in range(1, n):
            ri, ii = buf[i], inv[i]
            for k in range(d):
                ri[k] = ri[k] * ii - r0[k]
        for i in range(n):
            G[b, 0, i] = 0.0
            G[b, i, 0] = 0.0
        for i in range(1, n):
            ri = buf[i]
            for j in range(i, n):
                rj = buf[j]
                acc = 0.0
                for k in range(d):
                    acc += ri[k] * rj[k]
                G[b, i, j] = acc
                G[b, j, i] = acc
    return -1


@nb.njit(nogil=True, inline="always")
def _lu_solve(LU: np.ndarray, piv: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
    m = LU.shape[0]
    for r in range(m):
        out[r] = rhs[piv[r]]
    for r in range(m):
        for c in range(r):
            out[r] -= LU[r, c] * out[c]
    for r in range(m - 1, -1, -1):
        for c in range(r + 1, m):
            out[r] -= LU[r, c] * out[c]
        out[r] /= LU[r, r]


@nb.njit(cache=True, nogil=True)
def full_face_solve(
    G: np.ndarray,
    tol: float,
    pivot_rtol: float,
    a: np.ndarray,
    lower_sq: np.ndarray,
    upper_sq: np.ndarray,
    done: np.ndarray,
) -> None:
    """The dual QP's stationary point with every point on the ball, certified per set.

    On G scaled to max diag 1, solves 2 G a + lambda 1 = diag(G), sum(a) = 1. Where the
    system is regular (no pivot below ``pivot_rtol``), the weights finite and >= 0, and the
    Frank-Wolfe gap at them at most ``tol`` (the solver's own acceptance test), sets
    done[b] and writes the weights a[b], and f(a) and f(a) + gap (unscaled) to lower_sq[b]
    and upper_sq[b]. Elsewhere done[b] = False and the outputs are untouched.
    """
    B, n, _ = G.shape
    m = n + 1
    M = np.empty((m, m))
    LU = np.empty((m, m))
    rhs = np.empty(m)
    sol = np.empty(m)
    res = np.empty(m)
    delta = np.empty(m)
    w = np.empty(n)
    piv = np.empty(m, dtype=np.int64)
    for b in range(B):
        done[b] = False
        Gb = G[b]
        scale = 0.0
        for i in range(n):
            scale = max(scale, Gb[i, i])
        if not scale > 0.0:  # every point coincides: the pair start settles it exactly
            continue
        for i in range(n):
            for j in range(n):
                M[i, j] = 2.0 * (Gb[i, j] / scale)
            M[i, n] = 1.0
            M[n, i] = 1.0
            rhs[i] = Gb[i, i] / scale
        M[n, n] = 0.0
        rhs[n] = 1.0
        LU[:, :] = M
        for r in range(m):
            piv[r] = r
        regular = True
        for c in range(m):
            p = c
            for r in range(c + 1, m):
                if abs(LU[r, c]) > abs(LU[p, c]):
                    p = r
            if not abs(LU[p, c]) > pivot_rtol:
                regular = False
                break
            if p != c:
                for k in range(m):
                    LU[c, k], LU[p, k] = LU[p, k], LU[c, k]
                piv[c], piv[p] = piv[p], piv[c]
            for r in range(c + 1, m):
                f = LU[r, c] / LU[c, c]
                LU[r, c] = f
                for k in range(c + 1, m):
                    LU[r, k] -= f * LU[c, k]
        if not regular:
            continue
        # One step of iterative refinement: the face can be ill-conditioned.
        _lu_solve(LU, piv, rhs, sol)
        for r in range(m):
            acc = rhs[r]
            for k in range(m):
                acc -= M[r, k] * sol[k]
            res[r] = acc
        _lu_solve(LU, piv, res, delta)
        total = 0.0
        feasible = True
        for i in range(n):
            w[i] = sol[i] + delta[i]
            if not (w[i] >= 0.0 and w[i] < np.inf):
                feasible = False
                break
            total += w[i]
        if not (feasible and total > 0.0):
            continue
        for i in range(n):
            w[i] /= total
        # The certificate, as the torch solver computes it: grad = diag - 2 G a,
        # gap = max(grad) - a . grad, f(a) = a . diag - a . G a.
        gmax = -np.inf
        a_grad = 0.0
        f = 0.0
        for i in range(n):
            ga = 0.0
            for j in range(n):
                ga += (Gb[i, j] / scale) * w[j]
            gi = Gb[i, i] / scale
            grad = gi - 2.0 * ga
            gmax = max(gmax, grad)
            a_grad += w[i] * grad
            f += w[i] * gi - w[i] * ga
        gap = max(gmax - a_grad, 0.0)
        if not gap <= tol:
            continue
        f = max(f, 0.0)
        for i in range(n):
            a[b, i] = w[i]
        lower_sq[b] = f * scale
        upper_sq[b] = (f + gap) * scale
        done[b] = True
