"""Test oracle: a per-set exact minimum enclosing ball of unit vectors.

Slow (one scipy call per set) and independent of the batched solver in
:mod:`domainbench.metrics.stability`: the tests check the solver against it and
``benchmarks/stability.py`` times the solver against it.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls


def meb_radius_nnls(points: np.ndarray) -> float:
    """MEB radius of one set of vectors (n, d), L2-normalised here, via NNLS.

    For unit vectors the dual objective is 1 - ||X^T a||^2, so the ball's centre is the
    minimum-norm point w of conv(X). Lawson & Hanson (ch. 23): min ||z|| s.t. X z >= 1 is
    solved by NNLS on E = [X^T; 1^T], f = e_{d+1}; a zero residual means the origin lies in
    the hull (radius 1), else w is proportional to X^T u. Radius = max_i ||x_i - w||.
    """
    x = np.asarray(points, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    n, d = x.shape
    E = np.vstack([x.T, np.ones((1, n))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=100 * n)
    if np.linalg.norm(E @ u - f) < 1e-12:
        return 1.0
    w = x.T @ (u / u.sum())
    return float(np.linalg.norm(x - w, axis=1).max())
