"""Fused CPU kernels (numba) for the stability solver's two hot spots.

The torch path in ``stability`` is the reference and the one used on GPUs. On a CPU it
spends most of its time materialising float64 copies and running many tiny batched ops;
these kernels work one set at a time while the set is in cache:

- ``centred_gram``: float64 unit vectors relative to the set's first one, and their Gram
  matrix, in one pass over the float32/float64 input (no float64 copy of the whole batch);
- ``active_set_solve``: a primal active-set method for the dual QP, one set at a time
  (each face solved by Gaussian elimination with partial pivoting plus one refinement
  step), with the same duality-gap certificate and acceptance test as the torch solver.
  Sets it cannot settle (all points coinciding, a singular face, no convergence) go to
  the torch solver.

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


@nb.njit(nogil=True)
def _face_solve(
    Gs: np.ndarray, g: np.ndarray, idx: np.ndarray, k: int, pivot_rtol: float, work: tuple
) -> bool:
    """Stationary point of f on the face of the points idx[:k]: solve
    [[2 G_SS, 1], [1^T, 0]] [w; lambda] = [g_S; 1] by Gaussian elimination with partial
    pivoting and one step of iterative refinement (faces can be ill-conditioned). w lands
    in sol[:k] (``work`` = (M, LU, rhs, sol, res, delta, piv), scratch of size n + 1).
    False where a pivot falls below ``pivot_rtol`` (an affinely dependent face: duplicates,
    or more points on one great circle than it can hold)."""
    M, LU, rhs, sol, res, delta, piv = work
    m = k + 1
    for r in range(k):
        for c in range(k):
            M[r, c] = 2.0 * Gs[idx[r], idx[c]]
        M[r, k] = 1.0
        M[k, r] = 1.0
        rhs[r] = g[idx[r]]
    M[k, k] = 0.0
    rhs[k] = 1.0
    for r in range(m):
        piv[r] = r
        for c in range(m):
            LU[r, c] = M[r, c]
    for c in range(m):
        p = c
        for r in range(c + 1, m):
            if abs(LU[r, c]) > abs(LU[p, c]):
                p = r
        if not abs(LU[p, c]) > pivot_rtol:
            return False
        if p != c:
            for q in range(m):
                LU[c, q], LU[p, q] = LU[p, q], LU[c, q]
            piv[c], piv[p] = piv[p], piv[c]
        for r in range(c + 1, m):
            f = LU[r, c] / LU[c, c]
            LU[r, c] = f
            for q in range(c + 1, m):
                LU[r, q] -= f * LU[c, q]
    _lu_solve(LU, piv, rhs, sol, m)
    for r in range(m):
        acc = rhs[r]
        for q in range(m):
            acc -= M[r, q] * sol[q]
        res[r] = acc
    _lu_solve(LU, piv, res, delta, m)
    for r in range(m):
        sol[r] += delta[r]
        if not np.isfinite(sol[r]):
            return False
    return True


@nb.njit(nogil=True, inline="always")
def _lu_solve(LU: np.ndarray, piv: np.ndarray, rhs: np.ndarray, out: np.ndarray, m: int) -> None:
    for r in range(m):
        out[r] = rhs[piv[r]]
    for r in range(m):
        for c in range(r):
            out[r] -= LU[r, c] * out[c]
    for r in range(m - 1, -1, -1):
        for c in range(r + 1, m):
            out[r] -= LU[r, c] * out[c]
        out[r] /= LU[r, r]


@nb.njit(nogil=True)
def _gradient_gap(Gs: np.ndarray, g: np.ndarray, a: np.ndarray, grad: np.ndarray) -> tuple:
    """grad = g - 2 G a, the Frank-Wolfe gap max(grad) - a . grad, f(a), argmax(grad)."""
    n = g.shape[0]
    gmax, jmax, a_grad, f = -np.inf, 0, 0.0, 0.0
    for i in range(n):
        ga = 0.0
        for j in range(n):
            if a[j] != 0.0:
                ga += Gs[i, j] * a[j]
        grad[i] = g[i] - 2.0 * ga
        if grad[i] > gmax:
            gmax, jmax = grad[i], i
        a_grad += a[i] * grad[i]
        f += a[i] * g[i] - a[i] * ga
    return max(gmax - a_grad, 0.0), max(f, 0.0), jmax


@nb.njit(nogil=True)
def _to_face_optimum(
    Gs: np.ndarray, g: np.ndarray, a: np.ndarray, idx: np.ndarray, k: int, pivot_rtol: float,
    work: tuple,
) -> int:
    """From the simplex point a (supported on idx[:k]) move to the stationary point of
    that face, stepping only as far as every weight stays >= 0 and dropping the weight
    that reaches zero first (a point that fell inside the ball), until the solution of the
    remaining face is feasible. f never decreases. Returns the new k, or -1 where a face
    is singular."""
    sol = work[3]
    for _ in range(k + 1):  # every round but the last drops a point
        if not _face_solve(Gs, g, idx, k, pivot_rtol, work):
            return -1
        t, hit = 1.0, -1
        for r in range(k):
            w = sol[r]
            if w < 0.0:
                ar = a[idx[r]]
                ratio = ar / (ar - w)
                if ratio < t:
                    t, hit = ratio, r
        for r in range(k):
            i = idx[r]
            a[i] = max(a[i] + t * (sol[r] - a[i]), 0.0)
        if hit >= 0:
            a[idx[hit]] = 0.0
        kk, total = 0, 0.0
        for r in range(k):
            if a[idx[r]] > 0.0:
                idx[kk] = idx[r]
                total += a[idx[r]]
                kk += 1
        k = kk
        for r in range(k):
            a[idx[r]] /= total
        if hit < 0:
            return k
    return -1


@nb.njit(cache=True, nogil=True)
def active_set_solve(
    G: np.ndarray,
    tol: float,
    pivot_rtol: float,
    max_passes: int,
    full_first: bool,
    a_out: np.ndarray,
    lower_sq: np.ndarray,
    upper_sq: np.ndarray,
    done: np.ndarray,
) -> None:
    """Primal active-set method for the dual QP, one set at a time, with its certificate.

    On G scaled to max diag 1, start from the points that the solution on the face of all
    points weights positively (``full_first``: a few points in more dimensions mostly all
    lie on the ball, and one solve then settles them), or else on the diametral pair
    (optimal for its face). Then, until the Frank-Wolfe gap is at most ``tol`` (the torch
    solver's own acceptance test), add the point with the largest gradient (the farthest
    outside the current ball) and move to the optimum of the enlarged face. A settled set gets done[b]
    and its weights, f(a) and f(a) + gap (unscaled) in a_out[b], lower_sq[b] and
    upper_sq[b]. Sets with all points coinciding, a singular face on the way, or no
    convergence in ``max_passes`` additions keep done[b] = False and untouched outputs,
    for the torch solver.
    """
    B, n, _ = G.shape
    m = n + 1
    work = (
        np.empty((m, m)), np.empty((m, m)), np.empty(m), np.empty(m), np.empty(m),
        np.empty(m), np.empty(m, dtype=np.int64),
    )
    Gs, g = np.empty((n, n)), np.empty(n)
    a, grad = np.empty(n), np.empty(n)
    idx = np.empty(n, dtype=np.int64)
    for b in range(B):
        done[b] = False
        scale = 0.0
        for i in range(n):
            scale = max(scale, G[b, i, i])
        if not scale > 0.0:
            continue
        for i in range(n):
            for j in range(n):
                Gs[i, j] = G[b, i, j] / scale
        for i in range(n):
            g[i] = Gs[i, i]
        k = -1
        if full_first:
            for i in range(n):
                idx[i] = i
            if _face_solve(Gs, g, idx, n, pivot_rtol, work):
                # The points the full face's solution weights positively are a guess at
                # the support: start uniform on them, drop, then grow as needed.
                sol, kk = work[3], 0
                for i in range(n):
                    if sol[i] > 0.0:
                        idx[kk] = i
                        kk += 1
                a[:] = 0.0
                if kk == n:  # every point on the ball: that solution is the optimum
                    total = sol[:n].sum()
                    for i in range(n):
                        a[i] = sol[i] / total
                    k = n
                elif kk > 0:
                    for r in range(kk):
                        a[idx[r]] = 1.0 / kk
                    k = _to_face_optimum(Gs, g, a, idx, kk, pivot_rtol, work)
        if k < 0:
            best, p, q = -1.0, 0, 1
            for i in range(n):
                for j in range(i + 1, n):
                    dist = g[i] + g[j] - 2.0 * Gs[i, j]
                    if dist > best:
                        best, p, q = dist, i, j
            a[:] = 0.0
            a[p] = a[q] = 0.5
            idx[0], idx[1] = p, q
            k = 2
        ok = False
        gap, f = np.inf, 0.0
        for _ in range(max_passes + 1):
            gap, f, j = _gradient_gap(Gs, g, a, grad)
            if gap <= tol:
                ok = True
                break
            if a[j] > 0.0:
                break  # the face's solution is not accurate enough: leave it to torch
            idx[k] = j
            k = _to_face_optimum(Gs, g, a, idx, k + 1, pivot_rtol, work)
            if k < 0:
                break
        if not ok:
            continue
        for i in range(n):
            a_out[b, i] = a[i]
        lower_sq[b] = f * scale
        upper_sq[b] = (f + gap) * scale
        done[b] = True
