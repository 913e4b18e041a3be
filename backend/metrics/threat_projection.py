"""Projection of perturbations onto PD sublevel sets {δ : d(x, δ) <= ε}.

Two projections (paper, Section 3.2 and Appendix A.3):

- :func:`project_radial` — the "lazy" projection δ → min(1, ε / d(x, δ)) · δ. Exact in
  threat (d of the result is min(d, ε), by linear growth) and one threat evaluation, but not
  the nearest feasible point.
- :func:`project_exact` — the Euclidean projection onto the intersection of half-spaces
  {δ : <δ, m ⊙ (a - x)> <= ε β W ||a - x||²}, one per anchor of another class.
  ``method="nnls"`` (default) solves it as a least-distance program (Lawson & Hanson,
  "Solving Least Squares Problems", ch. 23) with ``scipy.optimize.nnls`` in the span of the
  constraint normals (an (m+1) × m problem, m = number of anchors of other classes, however
  large the images); ``method="dykstra"`` runs Dykstra's alternating projections, which for
  half-spaces is Hildreth's dual coordinate ascent, on the Gram matrix of the normals.

Both run per image in float64 on the CPU; numpy in → numpy out, torch in → torch out (same
device and dtype).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any, Literal, Protocol

import numpy as np

from domainbench.metrics.threat_errors import ThreatInputError


class ThreatSublevelSets(Protocol):
    """What the projections need of a threat model (``ProjectedDisplacement`` provides it);
    a protocol, so this module does not import the threat module that re-exports it."""

    def threat(self, x: Any, y: Any, delta: Any, mask: Any = None) -> Any: ...

    def halfspaces(self, x: Any, y: Hashable, eps: float, mask: Any = None) -> tuple[np.ndarray, np.ndarray]: ...


#: eigenvalues of the normals' Gram matrix below this fraction of the largest are treated
#: as 0 (exactly or nearly parallel normals, e.g. duplicate anchors)
GRAM_RTOL = 1e-12


def _is_torch(a: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def _check_eps(eps: Any) -> float:
    try:
        e = float(eps)
    except (TypeError, ValueError) as exc:
        raise ThreatInputError(f"eps must be a number >= 0, got {eps!r}") from exc
    if not np.isfinite(e) or e < 0:
        raise ThreatInputError(f"eps must be a finite number >= 0, got {eps!r}")
    return e


def project_radial(pd: ThreatSublevelSets, x: Any, y: Any, delta: Any, eps: float, mask: Any = None) -> Any:
    """δ scaled by min(1, ε / d(x, δ)) per image (batch); d of the result is min(d, ε)."""
    e = _check_eps(eps)
    t = pd.threat(x, y, delta, mask=mask)
    if _is_torch(t):
        import torch

        scale = torch.where(t > e, e / torch.where(t > 0, t, torch.ones_like(t)), torch.ones_like(t))
        return delta * scale.to(delta.dtype).reshape((-1,) + (1,) * (delta.ndim - 1))
    scale = np.where(t > e, e / np.where(t > 0, t, 1.0), 1.0)
    d = np.asarray(delta)
    return (d * scale.astype(d.dtype if d.dtype.kind == "f" else np.float32).reshape((-1,) + (1,) * (d.ndim - 1)))


def _ldp_nnls(delta: np.ndarray, normals: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """argmin ||z - δ|| s.t. N z <= b, via least-distance programming + NNLS.

    z = δ + w with w in the row space of N: w = Nᵀ μ. With G = N Nᵀ = V Λ Vᵀ and
    R = Λ^{1/2} Vᵀ (Rᵀ R = G), v = Λ^{1/2} Vᵀ μ has ||v|| = ||w|| and N w = Rᵀ v, so the
    problem is LDP: min ||v|| s.t. -Rᵀ v >= c, c = N δ - b. Lawson-Hanson: solve
    NNLS min ||E u - e||, E = [-R; cᵀ], e = (0, ..., 0, 1); r = E u - e; v = -r[:-1] / r[-1].
    """
    c = normals @ delta - bounds
    if np.all(c <= 0):
        return delta.copy()
    gram = normals @ normals.T
    evals, vecs = np.linalg.eigh(gram)
    keep = evals > GRAM_RTOL * max(float(evals[-1]), 0.0)
    if not np.any(keep):  # every normal is 0: the constraints read 0 <= b, always true for b >= 0
        return delta.copy()
    lam, vk = evals[keep], vecs[:, keep]
    root = np.sqrt(lam)
    scale = float(np.abs(c).max())
    e_mat = np.vstack([-(root[:, None] * vk.T), (c / scale)[None, :]])
    target = np.zeros(e_mat.shape[0])
    target[-1] = 1.0
    from scipy.optimize import nnls  # ~0.5 s to import: only a PD-threat computation needs it, never reading a run

    u, _ = nnls(e_mat, target, maxiter=50 * e_mat.shape[1])
    res = e_mat @ u - target
    if abs(res[-1]) < 1e-14:
        raise ThreatInputError("the sublevel set is empty (cannot happen for eps >= 0); check the anchors")
    v = -res[:-1] / res[-1] * scale
    mu = vk @ (v / root)
    return delta + normals.T @ mu


def _dykstra(
    delta: np.ndarray, normals: np.ndarray, bounds: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, bool]:
    """Dykstra / Hildreth on half-spaces: z = δ - Nᵀ α, α >= 0 updated one constraint at a time."""
    gram = normals @ normals.T
    diag = np.diag(gram).copy()
    live = diag > 0
    s = normals @ delta  # s_j = <z, n_j>, kept in sync with z
    alpha = np.zeros(normals.shape[0])
    ref = max(float(np.abs(bounds).max(initial=0.0)), float(np.abs(s).max(initial=0.0)), 1e-300)
    idx = np.flatnonzero(live)
    for _ in range(max_iter):
        biggest = 0.0
        for j in idx:
            t = max(alpha[j] + (s[j] - bounds[j]) / diag[j], 0.0)
            step = alpha[j] - t
            if step != 0.0:
                s += step * gram[:, j]
                alpha[j] = t
                biggest = max(biggest, abs(step) * diag[j])
        if biggest <= tol * ref:
            return delta - normals.T @ alpha, True
    return delta - normals.T @ alpha, False


def project_halfspaces(
    delta: np.ndarray,
    normals: np.ndarray,
    bounds: np.ndarray,
    method: Literal["nnls", "dykstra"] = "nnls",
    max_iter: int = 10_000,
    tol: float = 1e-12,
) -> np.ndarray:
    """Euclidean projection of a vector onto {z : normals @ z <= bounds} (float64)."""
    d = np.asarray(delta, dtype=np.float64).reshape(-1)
    n = np.asarray(normals, dtype=np.float64)
    b = np.asarray(bounds, dtype=np.float64)
    if n.ndim != 2 or n.shape[1] != d.size or b.shape != (n.shape[0],):
        raise ThreatInputError(f"normals {n.shape} / bounds {b.shape} do not fit a vector of size {d.size}")
    if n.shape[0] == 0:
        return d.copy()
    # unit normals: same set, better conditioned Gram matrix
    norms = np.linalg.norm(n, axis=1)
    nz = norms > 0
    if np.any(b[~nz] < 0):
        raise ThreatInputError("a constraint 0 <= b with b < 0 makes the set empty")
    n, b = n[nz] / norms[nz, None], b[nz] / norms[nz]
    if method == "nnls":
        return _ldp_nnls(d, n, b)
    if method == "dykstra":
        z, converged = _dykstra(d, n, b, max_iter, tol)
        if not converged:
            import warnings

            warnings.warn(f"Dykstra projection did not converge in {max_iter} sweeps", RuntimeWarning, stacklevel=2)
        return z
    raise ThreatInputError(f"method must be 'nnls' or 'dykstra', got {method!r}")


def project_exact(
    pd: ThreatSublevelSets,
    x: Any,
    y: Any,
    delta: Any,
    eps: float,
    mask: Any = None,
    method: Literal["nnls", "dykstra"] = "nnls",
    max_iter: int = 10_000,
    tol: float = 1e-12,
) -> Any:
    """Nearest point (Euclidean) to each δ_i in {δ : d(x_i, δ) <= ε}; batch in, batch out."""
    e = _check_eps(eps)
    is_torch = _is_torch(delta)
    xs = x.detach().cpu().numpy() if _is_torch(x) else np.asarray(x)
    ds = delta.detach().cpu().numpy() if is_torch else np.asarray(delta)
    ms = None if mask is None else (mask.detach().cpu().numpy() if _is_torch(mask) else np.asarray(mask))
    ys = y.detach().cpu().numpy() if _is_torch(y) else np.asarray(y)
    if xs.shape != ds.shape or xs.ndim < 2 or ys.shape != (xs.shape[0],):
        raise ThreatInputError(f"x {xs.shape}, delta {ds.shape} and y {ys.shape} must be batches (B, ...), (B, ...), (B,)")
    out = np.empty(ds.shape, dtype=np.float64)
    for i in range(xs.shape[0]):
        mi = None
        if ms is not None:
            mi = ms[i if ms.shape[0] > 1 else 0] if ms.ndim == xs.ndim else ms
        normals, bounds = pd.halfspaces(xs[i], ys[i], e, mask=mi)
        out[i] = project_halfspaces(ds[i], normals, bounds, method, max_iter, tol).reshape(ds.shape[1:])
    if is_torch:
        import torch

        return torch.from_numpy(out).to(device=delta.device, dtype=delta.dtype)
    return out.astype(ds.dtype) if ds.dtype.kind == "f" else out
