"""Intervals on balanced accuracy (and everything averaged or divided from per-class recalls) that hold
whatever the number of images per class: a normal interval with a *smoothed* per-class variance.

Balanced accuracy is the mean over the C classes present of each class's recall k_c / n_c. Its
variance is (1/C²) Σ_c p_c(1 − p_c) / n_c. The stratified percentile bootstrap estimates p_c(1 − p_c)
by the observed p̂_c(1 − p̂_c), which is 0 for a class with one image, or with all its images right or
all wrong: with one image per class (100 classes, 100 images) every resample is the sample itself and
the interval has zero width (measured coverage 50 %, 13 % at 1,000 classes; ``benchmarks/coverage.py``).
Here each class's variance uses p̃_c = (k_c + 2) / (n_c + 4) (two right and two wrong pseudo-images per
class, Agresti and Coull's "plus four"), which is never 0 and, for n_c = 1, is 0.24 whatever the image
says (the largest possible p(1 − p) is 0.25). The discrete steps balanced accuracy moves in are then
covered by a continuity correction: the standard error is widened by half a step, (1/C)·mean_c(1/n_c)/2,
divided by z at 95 % (so at the 95 % level the interval is exactly ± (z·se + half a step)).

To keep every number built on the recalls (means over cells and runs, mCE/rCE ratios) consistent with
the cell's interval, the interval is drawn rather than only written in closed form: a **Gaussian
multiplier bootstrap**. Each draw gives every image one standard-normal multiplier e_i, shared by all
cells and models (so the draws stay *paired*: a hard image moves every cell that saw it), and a cell's
balanced accuracy under the draw is

    BA + Σ_i e_i · g_i,   g_i = s · f_c · (x_i − p̃_c) / (n_c · C)   for image i of class c,

with f_c scaling the class's residuals to the smoothed variance p̃_c(1 − p̃_c)/n_c and s the continuity
widening. Each draw is then exactly normal with the smoothed variance, and its percentile interval is
the closed-form one up to Monte Carlo error (tested). Zero multipliers give the point values exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from domainbench.stats.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from domainbench.stats.intervals import DEFAULT_CONFIDENCE, normal_quantile

#: pseudo-images counted right, and as many wrong, in each class's variance (not in the point value)
PSEUDO = 2.0
#: the continuity correction is half a step of z·se at this level
_Z_REFERENCE = normal_quantile(0.95)
#: below this median number of images per class, say beside the interval that it is approximate
FEW_IMAGES_PER_CLASS = 5
FEW_IMAGES_NOTE = "few images per class: interval approximate"


def multipliers(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """(resamples, n) independent standard-normal multipliers, one per image and draw, reproducible under ``seed``."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    return np.random.default_rng(seed).standard_normal((resamples, n))


def shared_multipliers(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """:func:`multipliers`, made once for every caller that asks for the same ones and returned read-only: a run's
    intervals and Compare's draws use the same rows, and runs on the same images with the same seed share them."""
    return _shared(n, resamples, seed)


@lru_cache(maxsize=4)
def _shared(n: int, resamples: int, seed: int) -> np.ndarray:
    e = multipliers(n, resamples, seed)
    e.flags.writeable = False
    return e


@dataclass(frozen=True)
class Linear:
    """K numbers written as point + Σ_i e_i · loadings[i] (see the module's docstring)."""

    #: (K,) the point values (nan where undefined)
    point: np.ndarray
    #: (n, K) what each image's multiplier moves each number by
    loadings: np.ndarray
    #: (K,) the smoothed, continuity-widened standard error (= the norm of the loadings' column)
    se: np.ndarray
    #: (K,) the median number of images per class (for a rate over images: all of them)
    median_per_class: np.ndarray

    def draws(self, e: np.ndarray) -> np.ndarray:
        """(resamples, K): the numbers under each row of multipliers ``e`` (resamples, n), kept in [0, 1]: they are
        rates, and a value outside cannot be the truth, so clipping changes no interval's coverage."""
        with np.errstate(invalid="ignore"):
            return np.clip(self.point + np.atleast_2d(e) @ self.loadings, 0.0, 1.0)

    def intervals(self, confidence: float = DEFAULT_CONFIDENCE) -> list[tuple[float, float] | None]:
        """The closed-form intervals point ± z·se in [0, 1] (None where the number is undefined)."""
        z = normal_quantile(confidence)
        return [None if p != p else (max(0.0, p - z * s), min(1.0, p + z * s))
                for p, s in zip(self.point.tolist(), self.se.tolist(), strict=True)]


def _smoothed_residuals(x: np.ndarray, shown: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For one stratum's images (rows) and K numbers (columns): (point k/n, residual loadings scaled to the smoothed
    variance p̃(1 − p̃)/n, that variance, n); columns with no image shown are 0 (n = 0)."""
    n = shown.sum(axis=0)
    k = (x * shown).sum(axis=0)
    seen = np.where(n > 0, n, 1.0)
    smoothed = (k + PSEUDO) / (seen + 2 * PSEUDO)
    resid = (x - smoothed) * shown
    ss = (resid * resid).sum(axis=0)  # > 0 wherever n > 0: the smoothed rate is strictly between 0 and 1
    variance = np.where(n > 0, smoothed * (1 - smoothed) / seen, 0.0)
    scale = np.sqrt(variance / np.where(ss > 0, ss, 1.0))  # Σ (scale·resid)² = p̃(1 − p̃)/n
    return np.where(n > 0, k / seen, 0.0), resid * scale, variance, n


def _widened(loadings: np.ndarray, variance: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    se = np.sqrt(variance)
    widen = np.where(se > 0, 1.0 + 0.5 * step / (_Z_REFERENCE * np.where(se > 0, se, 1.0)), 1.0)
    return loadings * widen, se * widen


def balanced_accuracy_linear(correct: np.ndarray, present: np.ndarray, labels: np.ndarray) -> Linear:
    """Balanced accuracy of K cells on the same n images: ``correct`` and ``present`` are (n, K) (an image a cell
    did not evaluate is not present there), ``labels`` (n,). A class none of whose images a cell evaluated is not
    in that cell's mean, as in the point value."""
    y = np.asarray(labels)
    x = np.asarray(correct, dtype=float)
    shown = np.asarray(present, dtype=float)
    if x.ndim != 2 or x.shape != shown.shape or y.shape != (x.shape[0],):
        raise ValueError(f"correct and present must be (n, K) and labels (n,), got {x.shape}, {shown.shape}, {y.shape}")
    kk = x.shape[1]
    loadings = np.zeros_like(x)
    recall_sum, classes, variance, inverse_n = (np.zeros(kk) for _ in range(4))
    sizes = []
    for value in np.unique(y):
        members = np.flatnonzero(y == value)
        recall, resid, var, n = _smoothed_residuals(x[members], shown[members])
        loadings[members] = resid
        defined = n > 0
        recall_sum += recall
        classes += defined
        variance += var
        inverse_n += np.where(defined, 1.0 / np.where(defined, n, 1.0), 0.0)
        sizes.append(np.where(defined, n, np.nan))
    c = np.where(classes > 0, classes, 1.0)
    with np.errstate(invalid="ignore"):
        point = np.where(classes > 0, recall_sum / c, np.nan)
        median = np.nanmedian(np.array(sizes), axis=0) if sizes else np.full(kk, np.nan)
    # (1/C)·mean(1/n_c) is the step of balanced accuracy when every class has the same size (finer otherwise)
    loadings, se = _widened(loadings / c, variance / c**2, inverse_n / c**2)
    return Linear(point=point, loadings=loadings, se=se, median_per_class=median)


def rate_linear(events: np.ndarray, present: np.ndarray) -> Linear:
    """A rate over images (e.g. the label flip rate) of K cells: ``events`` and ``present`` (n, K); one stratum."""
    x = np.asarray(events, dtype=float)
    shown = np.asarray(present, dtype=float)
    if x.ndim != 2 or x.shape != shown.shape:
        raise ValueError(f"events and present must both be (n, K), got {x.shape} and {shown.shape}")
    rate, resid, var, n = _smoothed_residuals(x, shown)
    loadings, se = _widened(resid, var, np.where(n > 0, 1.0 / np.where(n > 0, n, 1.0), 0.0))
    return Linear(point=np.where(n > 0, rate, np.nan), loadings=loadings, se=se, median_per_class=n.astype(float))


def balanced_accuracy_interval(correct: np.ndarray, labels: np.ndarray,
                               confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The closed-form smoothed interval of one balanced accuracy (every image counted)."""
    c = np.asarray(correct, dtype=bool).reshape(-1, 1)
    iv = balanced_accuracy_linear(c, np.ones_like(c), labels).intervals(confidence)[0]
    if iv is None:
        raise ValueError("no image: balanced accuracy is undefined")
    return iv
