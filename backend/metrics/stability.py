"""Embedding stability (stability paper, Section 3): DivergenceRadius, R_cs and R_ed.

For one image and one corruption we have n embeddings (the clean image and m perturbed
versions). After L2 normalisation they lie on the unit sphere and

- ``cosine_robustness``    R_cs = (1 - min_{i,j} cos(x_i, x_j)) / 2 = max_{i,j} ||x_i - x_j||^2 / 4
- ``euclidean_robustness`` R_ed = max_{i,j} ||x_i - x_j|| / 2 = sqrt(R_cs)
- ``divergence_radius``    R_dr = radius of the minimum enclosing ball (MEB) of the x_i.

The MEB is solved exactly as the dual convex QP on the centred Gram matrix G (float64):

    r^2 = max_{a in simplex}  f(a) = sum_i a_i G_ii - a^T G a,      centre c = sum_i a_i y_i,

batched over B sets at once: in torch (on the GPU when the input is a CUDA tensor), with
the Gram matrices and the first KKT solve done by fused numba kernels for CPU input
(``stability_kernels``; the same arithmetic, without materialising float64 copies). Any a in
the simplex certifies the radius from both sides: f(a) <= r^2 (weak duality) and
max_i ||y_i - c(a)||^2 >= r^2 (the ball at c(a) encloses every point); their difference is
the Frank-Wolfe gap  max_i grad_i - a . grad  with grad = diag(G) - 2 G a.

The solver alternates two batched phases until every set's relative gap is below ``tol``:
- primal active-set passes: solve the KKT system on the current face (LU; a minimum-norm
  pseudo-inverse solve where the face is affinely dependent, as with duplicate points or
  many points on one great circle), step towards it as far as the weights stay >= 0, drop
  the weight that hit zero or add the most violated point. For the usual few points in
  general position this finishes in one to a few exact solves;
- pairwise Frank-Wolfe steps with exact line search (linear convergence on this problem)
  where the passes stall, moving the iterate so that the next passes see the right face.

Welzl-style recursion is deliberately not used: it is exponential in the number of support
points and breaks on duplicates.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from domainbench.errors import UserInputError
from domainbench.metrics import stability_kernels

__all__ = [
    "EmbeddingInputError",
    "EnclosingBall",
    "cosine_robustness",
    "divergence_radius",
    "enclosing_ball",
    "euclidean_robustness",
    "stability_metrics",
]

# Elements of (chunk, n, d) float64 materialised at once while building Gram matrices
# (about 1 MiB: the normalise/centre passes stay in cache).
_CHUNK_ELEMENTS = 1 << 17
# Relative duality gap (on G scaled to max diag 1) at which a set counts as solved. Rounding
# of the gap itself is ~n * 1e-16, and near-duplicate support points (1e-12 apart) leave a
# floor near 1e-13; the radius gap is at most 2 * radius * tol.
_DEFAULT_TOL = 1e-12
# Sets of at most this many points in d >= n - 1 dimensions start the active set on all
# points (points in general position then mostly all lie on the ball).
_FULL_START_MAX_N = 64
# Rounds (active-set passes + Frank-Wolfe steps) without a 10% smaller gap before giving up.
_STALL_ROUNDS = 6
# Eigenvalues of the scaled KKT matrix below this (relative) are treated as exact zeros;
# the CPU kernel's LU treats pivots below it as a singular face.
_PINV_RTOL = 1e-11
# CPU tensors go through the fused numba kernels (``stability_kernels``); off, every device
# takes the torch path the GPU uses. Input dtypes other than these always take it.
_CPU_KERNELS = True
_KERNEL_DTYPES = (torch.float32, torch.float64)


# (L, U, a, converged, iterations): squared-radius bounds, weights, per-set flag, FW steps.
_Solution = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]


class EmbeddingInputError(UserInputError):
    """Embeddings that cannot be turned into (B, n, d) unit vectors."""


@dataclass(frozen=True)
class EnclosingBall:
    """Minimum enclosing balls of B sets, with a duality-gap certificate.

    ``lower <= true radius <= upper`` holds for every set (up to float64 rounding of the
    Gram matrix); ``radius`` is the radius of a ball that encloses every point (the upper
    bound, clipped to the paper's [0, 1]). ``weights`` (B, n) are the dual variables: a point
    of the probability simplex whose combination of the points is the centre; points with
    positive weight lie on the ball's surface.
    """

    radius: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    weights: np.ndarray
    converged: np.ndarray
    iterations: int

    @property
    def gap(self) -> np.ndarray:
        return self.upper - self.lower


# --------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------


def _as_tensor(embeddings: Any, name: str) -> torch.Tensor:
    """Return the raw (B, n, d) tensor (original dtype and device), validating shape only."""
    if isinstance(embeddings, torch.Tensor):
        t = embeddings.detach()
    else:
        try:
            arr = np.asarray(embeddings)
        except ValueError as exc:  # ragged nested sequences
            raise EmbeddingInputError(
                f"{name}: the sets have mismatched shapes and cannot form one (B, n, d) array "
                f"({exc}); group sets with the same number of embeddings n and dimension d"
            ) from None
        if arr.dtype == object:
            raise EmbeddingInputError(
                f"{name}: the sets have mismatched shapes and cannot form one (B, n, d) array; "
                "group sets with the same number of embeddings n and dimension d"
            )
        if arr.dtype.kind not in "biuf":
            raise EmbeddingInputError(
                f"{name}: expected real numbers, got dtype {arr.dtype}; pass float embeddings"
            )
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex() or t.dtype == torch.bool:
        raise EmbeddingInputError(f"{name}: expected real float embeddings, got dtype {t.dtype}")
    if t.ndim != 3:
        hint = " (for a single set pass embeddings[None])" if t.ndim == 2 else ""
        raise EmbeddingInputError(
            f"{name}: expected shape (B, n, d) = (sets, embeddings per set, dimension), "
            f"got shape {tuple(t.shape)}{hint}"
        )
    _, n, d = t.shape
    if n < 2:
        raise EmbeddingInputError(
            f"{name}: each set needs at least 2 embeddings (the clean image and >= 1 perturbed "
            f"version), got n = {n}"
        )
    if d < 1:
        raise EmbeddingInputError(f"{name}: embedding dimension d must be >= 1, got d = {d}")
    return t


def _centred_chunk(raw: torch.Tensor, start: int, name: str) -> torch.Tensor:
    """float64 unit vectors 1..n-1 of one chunk of sets, minus the set's first one.

    Translating by a point of the set leaves the ball's radius unchanged; it keeps every
    entry at the scale of the set's spread (so small radii are not lost to cancellation),
    and makes coinciding embeddings give an exactly zero Gram matrix.
    """
    x = raw.to(torch.float64, copy=True)
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    odd = ~torch.isfinite(norm[..., 0]) | (norm[..., 0] == 0)
    if bool(odd.any()):
        # NaN/inf, all-zero rows, or a norm that over/underflowed: look at the largest
        # component to tell them apart, and rescale the rows that are merely extreme.
        b, i = torch.nonzero(odd, as_tuple=True)
        peak = x[b, i].abs().amax(dim=-1)
        for kind, bad in (("contains NaN or inf", ~torch.isfinite(peak)), ("is all zeros", peak == 0)):
            if bool(bad.any()):
                k = int(torch.nonzero(bad)[0, 0])
                fix = (
                    "fix the encoder output (or drop that image)"
                    if "NaN" in kind
                    else "it cannot be L2-normalised; check the encoder output for that image"
                )
                raise EmbeddingInputError(
                    f"{name}: embedding {int(i[k])} of set {start + int(b[k])} {kind}; {fix}"
                )
        rows = x[b, i] / peak[:, None]
        x[b, i] = rows
        norm[b, i] = torch.linalg.vector_norm(rows, dim=-1, keepdim=True)
    x.mul_(norm.reciprocal_())
    return x[:, 1:] - x[:, :1]


def _centred_gram(embeddings: Any, name: str = "embeddings") -> torch.Tensor:
    """Gram matrix (B, n, n) float64 of the unit vectors relative to each set's first one."""
    raw = _as_tensor(embeddings, name)
    B, n, d = raw.shape
    if _CPU_KERNELS and raw.device.type == "cpu" and raw.dtype in _KERNEL_DTYPES:
        G_np = np.empty((B, n, n))
        if stability_kernels.centred_gram(raw.contiguous().numpy(), G_np) < 0:
            return torch.from_numpy(G_np)
        # A zero or non-finite norm: the torch path below names the set or rescales it.
    return _centred_gram_torch(raw, name)


def _centred_gram_torch(raw: torch.Tensor, name: str) -> torch.Tensor:
    B, n, d = raw.shape
    G = torch.empty((B, n, n), dtype=torch.float64, device=raw.device)
    chunk = max(1, _CHUNK_ELEMENTS // (n * d))
    # Row and column 0 (the first point minus itself) stay exactly zero.
    G[:, 0, :] = 0.0
    G[:, :, 0] = 0.0
    for start in range(0, B, chunk):
        y = _centred_chunk(raw[start : start + chunk], start, name)
        G[start : start + chunk, 1:, 1:] = torch.bmm(y, y.transpose(1, 2))
    return G


def _full_start(embeddings: Any, n: int) -> bool:
    d = int(embeddings.shape[-1]) if hasattr(embeddings, "shape") else 0
    return n <= _FULL_START_MAX_N and n <= d + 1


def _pairwise_sq_dist(G: torch.Tensor) -> torch.Tensor:
    g = torch.diagonal(G, dim1=1, dim2=2)
    return (g[:, :, None] + g[:, None, :] - 2.0 * G).clamp_min(0.0)


# --------------------------------------------------------------------------------------
# The dual QP solver
# --------------------------------------------------------------------------------------


def _grad_gap(G: torch.Tensor, g: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    Ga = torch.bmm(G, a[:, :, None])[:, :, 0]
    grad = g - 2.0 * Ga
    gap = (grad.amax(dim=1) - (a * grad).sum(dim=1)).clamp_min(0.0)
    return Ga, grad, gap


def _frank_wolfe(
    G: torch.Tensor, g: torch.Tensor, a: torch.Tensor, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` pairwise Frank-Wolfe iterations with exact line search (in place on a)."""
    b = torch.arange(G.shape[0], device=G.device)
    Ga = torch.bmm(G, a[:, :, None])[:, :, 0]
    inf = torch.tensor(float("inf"), dtype=G.dtype, device=G.device)
    for _ in range(steps):
        grad = g - 2.0 * Ga
        i = grad.argmax(dim=1)
        j = torch.where(a > 0, grad, inf).argmin(dim=1)
        Gi, Gj = G[b, i], G[b, j]  # rows i and j (= columns, G is symmetric)
        q = Gi[b, i] + Gj[b, j] - 2.0 * Gi[b, j]  # ||y_i - y_j||^2
        slope = grad[b, i] - grad[b, j]  # >= 0: i maximises the gradient
        aj = a[b, j]
        # f(a + t(e_i - e_j)) = f(a) + t*slope - t^2*q: maximised at slope / (2q).
        t = torch.where(q > 0, slope / (2.0 * q).clamp_min(1e-300), torch.where(slope > 0, aj, 0.0))
        t = torch.minimum(t.clamp_min(0.0), aj)
        drop = t >= aj
        a[b, i] += t
        a[b, j] = torch.where(drop, torch.zeros_like(aj), a[b, j] - t)
        Ga += t[:, None] * (Gi - Gj)
    return a, Ga


def _kkt_polish(
    G: torch.Tensor, g: torch.Tensor, a: torch.Tensor, support: torch.Tensor, exact_inverse: bool
) -> torch.Tensor:
    """Stationary point of f on the face ``support``, near ``a`` (weights not clipped).

    KKT on the face S: grad_i = lambda for i in S, sum_S a = 1, solved for the correction
    (delta, lambda). ``exact_inverse`` uses an LU solve (fast; fails on an affinely dependent
    support); otherwise the minimum-norm pseudo-inverse solution, which for duplicates or
    cocircular support points still gives the unique centre with weights close to ``a``.
    """
    B, n = a.shape
    s = support.to(G.dtype)
    M = torch.zeros((B, n + 1, n + 1), dtype=G.dtype, device=G.device)
    M[:, :n, :n] = 2.0 * G * (s[:, :, None] * s[:, None, :])
    M[:, :n, :n] += torch.diag_embed(1.0 - s)
    M[:, :n, n] = s
    M[:, n, :n] = s
    Ga = torch.bmm(G, a[:, :, None])[:, :, 0]
    rhs = torch.cat([(g - 2.0 * Ga) * s, (1.0 - a.sum(dim=1, keepdim=True))], dim=1)
    if exact_inverse:
        sol = torch.linalg.solve_ex(M, rhs[:, :, None])[0][:, :, 0]
        sol = torch.where(torch.isfinite(sol), sol, torch.zeros_like(sol))
    else:
        pinv = torch.linalg.pinv(M, rtol=_PINV_RTOL, hermitian=True)
        sol = torch.bmm(pinv, rhs[:, :, None])[:, :, 0]
    return (a + sol[:, :n]) * s


def _objective(G: torch.Tensor, g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    Ga = torch.bmm(G, a[:, :, None])[:, :, 0]
    return (a * (g - Ga)).sum(dim=1)


def _ratio_step(
    G: torch.Tensor, g: torch.Tensor, a: torch.Tensor, S: torch.Tensor, target: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Move from ``a`` towards the face solution ``target`` while all weights stay >= 0.

    Returns (new point, whether the full step was taken, whether to accept it: f grew, or
    f stayed level to rounding and the gap did not grow). A weight that reaches zero first
    is set to exactly zero (it leaves the face).
    """
    step = target - a
    neg = S & (target < 0)
    ratio = torch.where(neg, a / (a - target).clamp_min(1e-300), torch.full_like(a, 2.0))
    rmin, hit = ratio.min(dim=1)
    full = rmin >= 1.0
    new = (a + rmin.clamp(0.0, 1.0)[:, None] * step).clamp_min(0.0) * S
    rows = torch.arange(new.shape[0], device=new.device)
    new[rows[~full], hit[~full]] = 0.0
    new = new / new.sum(dim=1, keepdim=True).clamp_min(1e-300)
    f_old, f_new = _objective(G, g, a), _objective(G, g, new)
    level = f_new >= f_old - 1e-15 * f_old.abs().clamp_min(1.0)
    if bool((level & (f_new <= f_old)).any()):
        # Moves along a degenerate face leave f level: keep them only if they help the gap.
        gap_old, gap_new = _grad_gap(G, g, a)[2], _grad_gap(G, g, new)[2]
        level &= gap_new <= gap_old
    accept = ((f_new > f_old) | level) & torch.isfinite(f_new)
    return new, full, accept


def _active_set(
    G: torch.Tensor, g: torch.Tensor, a: torch.Tensor, tol: float, passes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Primal active-set passes from the simplex point ``a``, batched.

    Each pass solves KKT on the current face and moves towards that solution as far as
    the weights stay non-negative (ratio test); a weight that hits zero leaves the face,
    and after a full step the most violated point joins it. The objective never
    decreases, so this is finite up to degeneracy. The LU solve is used first; where it
    fails (non-finite, or a step that would lower f, as on an affinely dependent face) the
    minimum-norm pseudo-inverse solve is used instead. Ill-conditioned but regular faces
    (a flat simplex of nearly coplanar points) keep their exact LU solution.
    Returns (best point by gap, its gap, the current iterate to continue from).
    """
    dev = G.device
    cur = a.clone()
    _, _, best_gap = _grad_gap(G, g, cur)
    best = cur.clone()
    support = cur > 0
    use_pinv = torch.zeros(cur.shape[0], dtype=torch.bool, device=dev)
    pending = torch.nonzero(best_gap > tol)[:, 0]
    for _ in range(passes):
        if pending.numel() == 0:
            break
        Gp, gp, S, ap = G[pending], g[pending], support[pending], cur[pending]
        raw = _kkt_polish(Gp, gp, ap, S, exact_inverse=True)
        finite = torch.isfinite(raw).all(dim=1)
        raw = torch.where(finite[:, None], raw, ap)
        new, full, accept = _ratio_step(Gp, gp, ap, S, raw)
        redo = torch.nonzero(~finite | ~accept | use_pinv[pending])[:, 0]
        if redo.numel() > 0:
            Gr, gr, Sr, ar = Gp[redo], gp[redo], S[redo], ap[redo]
            raw_r = _kkt_polish(Gr, gr, ar, Sr, exact_inverse=False)
            new_r, full_r, accept_r = _ratio_step(Gr, gr, ar, Sr, raw_r)
            new[redo], full[redo], accept[redo] = new_r, full_r, accept_r
        new = torch.where(accept[:, None], new, ap)
        _, ngrad, ngap = _grad_gap(Gp, gp, new)
        cur[pending] = new
        better = ngap < best_gap[pending]
        best[pending] = torch.where(better[:, None], new, best[pending])
        best_gap[pending] = torch.minimum(ngap, best_gap[pending])
        nxt = new > 0
        rows = torch.arange(nxt.shape[0], device=dev)
        viol = ngrad.argmax(dim=1)
        outside = ~nxt[rows, viol]
        # A full step on the face that left no outside point most violated: the LU
        # solve was not accurate on this face, so solve it by pseudo-inverse next time.
        use_pinv[pending] |= full & ~outside & (ngap > tol)
        nxt[rows[full], viol[full]] = True
        support[pending] = nxt
        pending = pending[(best_gap[pending] > tol) & accept]
    return best, best_gap, cur


def _solve(
    G: torch.Tensor,
    tol: float,
    max_iter: int,
    passes: int | None = None,
    full_start: bool = False,
) -> _Solution:
    """Solve the dual QP for every set. Returns (L, U, a, converged, iterations) unscaled.

    ``full_start``: begin on the face of all points (worth it for a few points in more
    dimensions than points), else on the diametral pair. On CPU each set first goes
    through the numba active-set kernel (at most ``passes`` points added, default 2n + 8);
    the sets it does not certify, every set on other devices, and every set when
    ``passes`` is 0 (Frank-Wolfe only) go through the batched torch solver.
    """
    if not (_CPU_KERNELS and G.device.type == "cpu") or passes == 0:
        return _solve_torch(G, tol, max_iter, passes, full_start)
    B, n, _ = G.shape
    a, L, U = np.zeros((B, n)), np.zeros(B), np.zeros(B)
    done = np.zeros(B, dtype=bool)
    kernel_passes = 2 * n + 8 if passes is None else passes
    stability_kernels.active_set_solve(
        G.contiguous().numpy(), tol, _PINV_RTOL, kernel_passes, full_start, a, L, U, done
    )
    a_t, L_t, U_t = torch.from_numpy(a), torch.from_numpy(L), torch.from_numpy(U)
    converged = torch.from_numpy(done.copy())
    its = 0
    if not done.all():
        rest = torch.from_numpy(~done)
        L_t[rest], U_t[rest], a_t[rest], converged[rest], its = _solve_torch(
            G[rest], tol, max_iter, passes, full_start
        )
    return L_t, U_t, a_t, converged, its


def _solve_torch(
    G: torch.Tensor, tol: float, max_iter: int, passes: int | None, full_start: bool
) -> _Solution:
    """The batched torch solver (any device): pair or uniform start, then alternating
    active-set passes and Frank-Wolfe steps until each set is solved or stalls."""
    B, n, _ = G.shape
    dev, dt = G.device, G.dtype
    g_raw = torch.diagonal(G, dim1=1, dim2=2)
    scale = g_raw.amax(dim=1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    Gs = G / scale[:, None, None]
    gs = g_raw / scale[:, None]

    # Start on the diametral pair: then f(a) = D^2/4, already R_ed^2 <= r^2.
    D2 = _pairwise_sq_dist(Gs).reshape(B, n * n)
    flat = D2.argmax(dim=1)
    a = torch.zeros((B, n), dtype=dt, device=dev)
    half = torch.full((B, 1), 0.5, dtype=dt, device=dev)
    a.scatter_add_(1, (flat // n)[:, None], half)
    a.scatter_add_(1, (flat % n)[:, None], half)
    if full_start:
        # Few points in general position usually all lie on the ball: one KKT solve on the
        # full set then finishes most sets (the pair stays where it is already optimal).
        _, _, gap0 = _grad_gap(Gs, gs, a)
        a = torch.where((gap0 > tol)[:, None], torch.full_like(a, 1.0 / n), a)

    a_out = a.clone()
    gap_out = torch.full((B,), float("inf"), dtype=dt, device=dev)
    stalled = torch.zeros(B, dtype=torch.long, device=dev)
    idx = torch.arange(B, device=dev)
    Gw, gw, aw = Gs, gs, a
    passes = min(n + 4, 64) if passes is None else max(0, passes)
    steps, total_steps = 0, 0
    while True:
        best_a, best_gap, cur = _active_set(Gw, gw, aw, tol, passes)
        prev = gap_out[idx]
        improved = best_gap < prev
        a_out[idx[improved]] = best_a[improved]
        gap_out[idx] = torch.minimum(best_gap, prev)
        stalled[idx] = torch.where(best_gap < 0.9 * prev, 0, stalled[idx] + 1)
        # Stop a set once solved, or when rounding keeps it from progressing any further
        # (its certificate then says how close it got).
        done = (gap_out[idx] <= tol) | (stalled[idx] >= _STALL_ROUNDS)
        if total_steps >= max_iter:
            done = torch.ones_like(done)
        keep = ~done
        if not bool(keep.any()):
            break
        idx, Gw, gw = idx[keep], Gw[keep], gw[keep]
        # Frank-Wolfe moves on from where the active-set passes stalled.
        steps = max(1, min(max(8, 2 * steps), 256, max_iter - total_steps))
        aw, _ = _frank_wolfe(Gw, gw, cur[keep].clone(), steps)
        total_steps += steps

    Ga, _, gap = _grad_gap(Gs, gs, a_out)
    L = ((a_out * gs).sum(dim=1) - (a_out * Ga).sum(dim=1)).clamp_min(0.0)
    converged = gap <= tol
    return L * scale, (L + gap) * scale, a_out, converged, total_steps


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def _ball_from_gram(
    G: torch.Tensor,
    embeddings: Any,
    tol: float = _DEFAULT_TOL,
    max_iter: int = 20_000,
    active_set_passes: int | None = None,
) -> EnclosingBall:
    B, n, _ = G.shape
    if B == 0:
        empty = np.zeros(0)
        return EnclosingBall(empty, empty, empty, np.zeros((0, n)), np.zeros(0, bool), 0)
    L, U, a, converged, its = _solve(
        G, tol, max_iter, active_set_passes, _full_start(embeddings, n)
    )
    lower = L.sqrt().clamp(0.0, 1.0)
    # The unit ball at the origin encloses every unit vector: 1 is always a valid upper bound.
    upper = torch.maximum(U.sqrt().clamp(max=1.0), lower)
    conv = _to_numpy(converged).astype(bool)
    if not conv.all():
        warnings.warn(
            f"divergence_radius: {int((~conv).sum())} set(s) stopped before the duality gap "
            f"reached tol={tol:g} (max_iter={max_iter} reached, or no progress left in float64); "
            "their lower/upper bounds are still valid",
            RuntimeWarning,
            stacklevel=3,
        )
    up = _to_numpy(upper)
    return EnclosingBall(
        radius=up.copy(),
        lower=_to_numpy(lower),
        upper=up,
        weights=_to_numpy(a),
        converged=conv,
        iterations=its,
    )


def enclosing_ball(
    embeddings: Any,
    *,
    tol: float = _DEFAULT_TOL,
    max_iter: int = 20_000,
    active_set_passes: int | None = None,
) -> EnclosingBall:
    """Minimum enclosing balls of the L2-normalised embeddings, one per set.

    ``embeddings``: array-like or torch tensor of shape (B, n, d); a CUDA tensor is solved
    on its GPU. ``tol`` is the duality gap, relative to the set's squared spread, at which
    a set is accepted (the radius gap is then at most 2 * radius * tol); ``max_iter``
    bounds the Frank-Wolfe steps and ``active_set_passes`` the active-set passes between
    them (default n + 4, at most 64) and the points the CPU kernel may add (default
    2n + 8); 0 leaves everything to Frank-Wolfe.
    """
    G = _centred_gram(embeddings)
    return _ball_from_gram(G, embeddings, tol, max_iter, active_set_passes)


def divergence_radius(
    embeddings: Any, return_bounds: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DivergenceRadius R_dr of each set: radius of the minimum enclosing ball, shape (B,).

    With ``return_bounds=True`` returns ``(radius, lower, upper)``, the duality-gap
    certificate ``lower <= R_dr <= upper``.
    """
    ball = enclosing_ball(embeddings)
    if return_bounds:
        return ball.radius, ball.lower, ball.upper
    return ball.radius


def _max_sq_dist(G: torch.Tensor) -> torch.Tensor:
    if G.shape[0] == 0:
        return torch.zeros(0, dtype=G.dtype, device=G.device)
    return _pairwise_sq_dist(G).amax(dim=(1, 2))


def _cosine_from_gram(G: torch.Tensor) -> np.ndarray:
    # For unit vectors (1 - cos)/2 = ||x_i - x_j||^2 / 4; the difference form keeps
    # small values exact instead of losing them to 1 - cos cancellation.
    return _to_numpy((_max_sq_dist(G) / 4.0).clamp(0.0, 1.0))


def cosine_robustness(embeddings: Any) -> np.ndarray:
    """R_cs = (1 - min pairwise cosine similarity) / 2 for each set, shape (B,)."""
    return _cosine_from_gram(_centred_gram(embeddings))


def euclidean_robustness(embeddings: Any) -> np.ndarray:
    """R_ed = max pairwise distance / 2 for each set, shape (B,); equals sqrt(R_cs) exactly."""
    return np.sqrt(cosine_robustness(embeddings))


def stability_metrics(embeddings: Any, clean: Any | None = None) -> dict[str, np.ndarray]:
    """All stability metrics for B images in one call.

    ``embeddings``: (B, n, d) — per image, the clean embedding and the perturbed ones; or,
    with ``clean`` (B, d) given, only the perturbed ones (B, m, d) and the clean embedding is
    prepended. Returns arrays of shape (B,) under "divergence_radius", "cosine",
    "euclidean" and "gap" (upper - lower certificate of the radius).
    """
    if clean is not None:
        embeddings = _with_clean(embeddings, clean)
    G = _centred_gram(embeddings)
    ball = _ball_from_gram(G, embeddings)
    cos = _cosine_from_gram(G)
    return {
        "divergence_radius": ball.radius,
        "cosine": cos,
        "euclidean": np.sqrt(cos),
        "gap": ball.gap,
    }


def _with_clean(perturbed: Any, clean: Any) -> torch.Tensor:
    p = perturbed if isinstance(perturbed, torch.Tensor) else _array_or_error(perturbed, "embeddings")
    c = clean if isinstance(clean, torch.Tensor) else _array_or_error(clean, "clean")
    if c.ndim != 2:
        raise EmbeddingInputError(f"clean: expected shape (B, d), got shape {tuple(c.shape)}")
    if p.ndim != 3:
        raise EmbeddingInputError(
            f"embeddings: with clean given, expected perturbed embeddings of shape (B, m, d), "
            f"got shape {tuple(p.shape)}"
        )
    if p.shape[0] != c.shape[0] or p.shape[2] != c.shape[1]:
        raise EmbeddingInputError(
            f"clean has shape {tuple(c.shape)} but embeddings has shape {tuple(p.shape)}: "
            "expected clean (B, d) and perturbed (B, m, d) with the same B and d"
        )
    if c.device != p.device:
        raise EmbeddingInputError(
            f"clean is on {c.device} but embeddings is on {p.device}; put both on one device"
        )
    dtype = torch.promote_types(p.dtype, c.dtype)
    return torch.cat([c[:, None, :].to(dtype), p.to(dtype)], dim=1)


def _array_or_error(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, Sequence) or isinstance(x, np.ndarray):
        try:
            arr = np.asarray(x)
        except ValueError:
            arr = np.empty(0, dtype=object)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise EmbeddingInputError(
                f"{name}: expected a numeric array with equal-length rows, got dtype {arr.dtype}"
            )
        return torch.from_numpy(np.ascontiguousarray(arr))
    raise EmbeddingInputError(f"{name}: expected an array or torch tensor, got {type(x).__name__}")
