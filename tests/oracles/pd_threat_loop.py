"""Test oracle: the PD threat as a direct loop over anchors.

Independent of the matrix-product form in :class:`domainbench.metrics.threat.ProjectedDisplacement`
(no expansion of ||a - x||², no centring, no chunking): ``tests/metrics/test_threat.py``
checks the product against it and ``benchmarks/pd_threat.py`` times the product against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbench.metrics.threat import DEFAULT_BETA


def threat_per_anchor_loop(
    anchors: Any,
    anchor_labels: Any,
    x: Any,
    y: Any,
    delta: Any,
    beta: float = DEFAULT_BETA,
    class_weights: Any = None,
    mask: Any = None,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Direct per-anchor loop: for each anchor, a - x, <δ, a - x> and ||a - x||² per input.

    Same definition and conventions as :meth:`ProjectedDisplacement.threat` (anchors equal
    to x ignored; ``class_weights`` a (C, C) matrix in sorted-class order or None), computed
    in ``dtype`` (float64 by default) without any expansion.
    """
    a = np.asarray(anchors, dtype=dtype).reshape(len(anchors), -1)
    lab = np.asarray(anchor_labels)
    classes, a_cls = np.unique(lab, return_inverse=True)
    xb = np.asarray(x, dtype=dtype).reshape(len(x), -1)
    db = np.asarray(delta, dtype=dtype).reshape(len(delta), -1)
    if mask is not None:
        db = db * np.broadcast_to(np.asarray(mask, dtype=dtype), np.shape(delta)).reshape(len(delta), -1)
    y_cls = np.searchsorted(classes, np.asarray(y))
    w = np.ones((classes.size, classes.size)) if class_weights is None else np.asarray(class_weights, dtype=np.float64)
    out = np.zeros(xb.shape[0], dtype=dtype)
    for j in range(a.shape[0]):
        diff = a[j][None, :] - xb
        num = np.einsum("bd,bd->b", db, diff)
        den = np.einsum("bd,bd->b", diff, diff)
        use = (y_cls != a_cls[j]) & (den > 0)
        val = np.zeros_like(out)
        val[use] = np.maximum(num[use], 0) / (beta * w[y_cls[use], a_cls[j]] * den[use])
        np.maximum(out, val, out=out)
    return out
