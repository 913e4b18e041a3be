"""Classification robustness metrics: arrays in, floats out.

Definitions follow ``DESIGN.md`` ("Metrics, exactly") and the DeepBench paper (Sec. 3.1):

- balanced accuracy: mean over classes *with support* of per-class recall; identical to
  ``sklearn.metrics.balanced_accuracy_score`` on the labels the confusion matrix counts
  (a class never predicted has recall 0; a class absent from ``y_true`` is left out).
- label flip probability LFP = flips / n (the prediction under corruption differs from the
  same model's clean prediction); needs no labels.
- CE_c  = Σ_s E^f_{s,c} / Σ_s E^base_{s,c};                         mCE = mean_c CE_c
- rCE_c = Σ_s (E^f_{s,c} − E^f_clean) / Σ_s (E^base_{s,c} − E^base_clean); rCE = mean_c
- FR_c  = Σ_s LFP^f_{s,c} / Σ_s LFP^base_{s,c};                     mFR = mean_c FR_c
  where E = 1 − balanced accuracy.

Undefined terms. When the baseline does not degrade on corruption c (its denominator is
``<= DEGRADATION_EPS``) the term for c is undefined: the ``*_per_corruption`` functions
return ``None`` for it, never infinity. The mean (``mce``, ``rce``, ``mfr``) is taken over
the corruptions whose term is defined, and is ``None`` when none is. Callers that must not
hide a dropped corruption read the per-corruption lists (the aggregator reports them).

Inputs are validated: NaN/inf, negative counts, values outside [0, 1] and mismatched
shapes raise :class:`MetricInputError` naming the argument.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from domainbench.errors import UserInputError

#: a baseline whose summed error increase (or flip probability) is at most this is treated
#: as "does not degrade": well below 1/n for any realistic n, above float round-off.
DEGRADATION_EPS = 1e-12

#: a correlation input whose standard deviation is at most this has no defined correlation
_FLAT_STD = 1e-12


class MetricInputError(UserInputError):
    """A metric received an input it cannot be computed from; the message says which."""


# --------------------------------------------------------------------------- validation


def _finite_array(x: ArrayLike, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(f"{name} must be numeric, got {x!r}") from exc
    if not np.all(np.isfinite(arr)):
        raise MetricInputError(
            f"{name} contains NaN or infinite values; pass only cells that have data "
            "(drop missing corruption/severity cells before calling)"
        )
    return arr


def _confusion(confusion: ArrayLike) -> np.ndarray:
    c = _finite_array(confusion, "confusion")
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] == 0:
        raise MetricInputError(
            f"confusion must be a non-empty square C×C matrix (rows = true class, "
            f"columns = predicted class), got shape {c.shape}"
        )
    if np.any(c < 0):
        raise MetricInputError("confusion contains negative counts; counts must be >= 0")
    return c


def _grid(x: ArrayLike, name: str) -> np.ndarray:
    """A (corruptions, severities) array of errors or flip probabilities in [0, 1]."""
    arr = _finite_array(x, name)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise MetricInputError(
            f"{name} must be a 2-D array of shape (corruptions, severities) with at least "
            f"one of each, got shape {arr.shape}"
        )
    if np.any(arr < 0) or np.any(arr > 1):
        raise MetricInputError(
            f"{name} must hold rates in [0, 1] (errors = 1 − balanced accuracy, or flip "
            f"probabilities); got values in [{arr.min():g}, {arr.max():g}]"
        )
    return arr


def _rate(x: float, name: str) -> float:
    arr = _finite_array(x, name)
    if arr.ndim != 0:
        raise MetricInputError(f"{name} must be a single number, got shape {arr.shape}")
    v = float(arr)
    if not 0.0 <= v <= 1.0:
        raise MetricInputError(f"{name} must be a rate in [0, 1], got {v:g}")
    return v


def _same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise MetricInputError(
            f"{name_a} has shape {a.shape} but {name_b} has shape {b.shape}; both must "
            "cover the same (corruptions, severities) cells in the same order"
        )


# --------------------------------------------------------------------------- accuracy


def per_class_recall(confusion: ArrayLike) -> np.ndarray:
    """Recall of each class (diagonal / row sum); ``nan`` for a class with no true samples."""
    c = _confusion(confusion)
    support = c.sum(axis=1)
    recall = np.full(c.shape[0], np.nan)
    has = support > 0
    recall[has] = np.diag(c)[has] / support[has]
    return recall


def balanced_accuracy(confusion: ArrayLike) -> float:
    """Mean per-class recall over the classes that occur in the true labels.

    ``confusion[i, j]`` counts images of true class ``i`` predicted as class ``j``.
    Raises :class:`MetricInputError` when the matrix counts no image at all.
    """
    c = _confusion(confusion)
    if c.sum() <= 0:
        raise MetricInputError(
            "confusion counts no images (all zeros): balanced accuracy is undefined; "
            "evaluate at least one labelled image"
        )
    recall = per_class_recall(c)
    return float(np.mean(recall[~np.isnan(recall)]))


def balanced_accuracy_from_counts(support: ArrayLike, correct: ArrayLike) -> float:
    """Balanced accuracy from per-class counts (a confusion matrix's row sums and diagonal).

    The same arithmetic as :func:`balanced_accuracy` on the matrix, so the two agree exactly.
    """
    s = _finite_array(support, "support")
    k = _finite_array(correct, "correct")
    if s.ndim != 1 or s.shape != k.shape or s.size == 0:
        raise MetricInputError(f"support and correct must be two equal-length 1-D counts, got {s.shape} and {k.shape}")
    if np.any(s < 0) or np.any(k < 0) or np.any(k > s):
        raise MetricInputError("per-class counts must satisfy 0 <= correct <= support")
    if s.sum() <= 0:
        raise MetricInputError(
            "confusion counts no images (all zeros): balanced accuracy is undefined; "
            "evaluate at least one labelled image"
        )
    has = s > 0
    return float(np.mean(k[has] / s[has]))


def label_flip_probability(flips: int, n: int) -> float:
    """Fraction of ``n`` images whose corrupted prediction differs from the clean one."""
    if isinstance(flips, bool) or isinstance(n, bool):
        raise MetricInputError("flips and n must be integer counts, not booleans")
    if int(n) != n or int(flips) != flips:
        raise MetricInputError(f"flips and n must be integer counts, got flips={flips}, n={n}")
    flips, n = int(flips), int(n)
    if n <= 0:
        raise MetricInputError(f"n must be a positive number of images, got {n}")
    if not 0 <= flips <= n:
        raise MetricInputError(f"flips must lie in [0, n={n}], got {flips}")
    return flips / n


# --------------------------------------------------------------------------- relative metrics


def _ratio_terms(num: np.ndarray, den: np.ndarray) -> list[float | None]:
    """num_c / den_c per corruption, ``None`` where the baseline does not degrade."""
    return [float(a / b) if b > DEGRADATION_EPS else None for a, b in zip(num, den, strict=True)]


def mean_defined(terms: Sequence[float | None]) -> float | None:
    """Mean of the defined (non-``None``) terms; ``None`` when no term is defined."""
    vals = [t for t in terms if t is not None]
    return float(math.fsum(vals) / len(vals)) if vals else None


def ce_per_corruption(err: ArrayLike, base_err: ArrayLike) -> list[float | None]:
    """CE_c = Σ_s err[c, s] / Σ_s base_err[c, s] for each corruption c (``None``: undefined)."""
    e, b = _grid(err, "err"), _grid(base_err, "base_err")
    _same_shape(e, b, "err", "base_err")
    return _ratio_terms(e.sum(axis=1), b.sum(axis=1))


def rce_per_corruption(
    err: ArrayLike, err_clean: float, base_err: ArrayLike, base_err_clean: float
) -> list[float | None]:
    """rCE_c = Σ_s (err − err_clean) / Σ_s (base_err − base_err_clean) per corruption.

    ``None`` where the baseline's summed error increase is ``<= DEGRADATION_EPS`` (it does
    not degrade, or even improves, under that corruption).
    """
    e, b = _grid(err, "err"), _grid(base_err, "base_err")
    _same_shape(e, b, "err", "base_err")
    ec, bc = _rate(err_clean, "err_clean"), _rate(base_err_clean, "base_err_clean")
    return _ratio_terms((e - ec).sum(axis=1), (b - bc).sum(axis=1))


def fr_per_corruption(lfp: ArrayLike, base_lfp: ArrayLike) -> list[float | None]:
    """FR_c = Σ_s lfp[c, s] / Σ_s base_lfp[c, s] for each corruption (``None``: undefined)."""
    f, b = _grid(lfp, "lfp"), _grid(base_lfp, "base_lfp")
    _same_shape(f, b, "lfp", "base_lfp")
    return _ratio_terms(f.sum(axis=1), b.sum(axis=1))


def mce(err: ArrayLike, base_err: ArrayLike) -> float | None:
    """Mean corruption error of a model relative to the baseline.

    ``err``, ``base_err``: (corruptions, severities) errors (1 − balanced accuracy).
    Returns the mean of CE_c over corruptions where it is defined, ``None`` if none is.
    """
    return mean_defined(ce_per_corruption(err, base_err))


def rce(
    err: ArrayLike, err_clean: float, base_err: ArrayLike, base_err_clean: float
) -> float | None:
    """Relative corruption error: mean over defined corruptions of rCE_c, else ``None``."""
    return mean_defined(rce_per_corruption(err, err_clean, base_err, base_err_clean))


def mfr(lfp: ArrayLike, base_lfp: ArrayLike) -> float | None:
    """Mean flip rate relative to the baseline: mean over defined corruptions of FR_c."""
    return mean_defined(fr_per_corruption(lfp, base_lfp))


# --------------------------------------------------------------------------- correlation


def pearson_acc_lfp(acc: ArrayLike, lfp: ArrayLike) -> float | None:
    """Pearson correlation between balanced accuracy and LFP across (corruption, severity) cells.

    Any matching shapes are accepted and flattened. ``None`` when undefined: fewer than
    3 cells, or either input constant across cells.
    """
    a = _finite_array(acc, "acc").ravel()
    f = _finite_array(lfp, "lfp").ravel()
    if a.shape != f.shape:
        raise MetricInputError(
            f"acc has {a.size} cells but lfp has {f.size}; pass one value per cell for both"
        )
    if a.size < 3:
        return None
    da, df = a - a.mean(), f - f.mean()
    sa, sf = math.sqrt(float(da @ da) / a.size), math.sqrt(float(df @ df) / a.size)
    if sa <= _FLAT_STD or sf <= _FLAT_STD:
        return None
    r = float(da @ df) / (a.size * sa * sf)
    return max(-1.0, min(1.0, r))
