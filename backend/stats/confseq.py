"""Anytime-valid confidence sequences for the mean of a bounded stream (values in [0, 1]).

The betting confidence sequence of Waudby-Smith & Ramdas ("Estimating means of bounded random
variables by betting", JRSS-B 2024), hedged capital process with the predictable plug-in bets
(their Eq. 26-27, "PrPl"): for each candidate mean m, a gambler bets on x_i > m and on x_i < m
with half the capital each; the capital K_t(m) is a nonnegative martingale when m is the true
mean, so by Ville's inequality P(exists t: K_t(m) >= 1/alpha) <= alpha. The confidence
sequence is every m whose capital is still below 1/alpha, intersected over time. Coverage
therefore holds simultaneously at every t: the evaluation may look after every round and stop
whenever it likes without invalidating the interval.

m is searched on a grid (default 2,001 points, spacing 0.0005); the reported interval is the
smallest and largest grid point not rejected, widened by one grid step so discretisation never
makes it too narrow.
"""

from __future__ import annotations

import math

import numpy as np

from domainbench.stats.intervals import DEFAULT_CONFIDENCE, check_confidence

#: bets are truncated at c / m (c / (1 - m)) so the capital can never reach zero (WSR use 1/2 or 3/4)
TRUNCATION = 0.5
GRID_POINTS = 2001


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bet sizes lambda_t (each uses x_1..x_{t-1} only); x: (..., t)."""
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    csum = np.cumsum(x, axis=-1)
    mu = (0.5 + csum) / (t + 1)  # mu_hat_t uses x_1..x_t
    sq = np.cumsum((x - mu) ** 2, axis=-1)
    var = (0.25 + sq) / (t + 1)  # sigma_hat^2_t
    var_prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), var[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(2 / alpha) / (var_prev * t * np.log(t + 1)))


def log_capital(x: np.ndarray, m: np.ndarray | float, alpha: float) -> np.ndarray:
    """Running max over time of the hedged log-capital log K_t(m), for each stream and candidate m.

    ``x``: (streams, t) or (t,) values in [0, 1]; ``m``: scalar or (grid,) candidate means.
    Returns (..., grid) for a grid (the maximum over t, i.e. whether m was ever rejected).
    """
    x = np.asarray(x, dtype=float)
    if np.any((x < 0) | (x > 1)):
        raise ValueError("a betting confidence sequence needs values in [0, 1]")
    lam = _bets(x, alpha)[..., None]  # (..., t, 1)
    m = np.atleast_1d(np.asarray(m, dtype=float))  # (grid,)
    d = x[..., None] - m  # (..., t, grid)
    with np.errstate(divide="ignore"):
        lam_plus = np.minimum(lam, TRUNCATION / np.maximum(m, 1e-12))
        lam_minus = np.minimum(lam, TRUNCATION / np.maximum(1 - m, 1e-12))
        up = np.cumsum(np.log1p(lam_plus * d), axis=-2)
        down = np.cumsum(np.log1p(-lam_minus * d), axis=-2)
    hedged = np.logaddexp(up, down) + math.log(0.5)
    return hedged.max(axis=-2)


def betting_cs(x: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, grid: int = GRID_POINTS) -> tuple[float, float]:
    """The anytime-valid interval for the mean of ``x`` (a stream in [0, 1], in arrival order),
    running-intersected over all prefixes: every m never rejected along the way."""
    alpha = 1 - check_confidence(confidence)
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        return 0.0, 1.0
    ms = np.linspace(0.0, 1.0, grid)
    kept = ms[log_capital(x, ms, alpha) < math.log(1 / alpha)]
    if kept.size == 0:  # cannot happen with exact arithmetic at the true mean; be conservative
        centre = float(x.mean())
        return centre, centre
    step = 1.0 / (grid - 1)
    return max(0.0, float(kept.min()) - step), min(1.0, float(kept.max()) + step)


def paired_difference_cs(a: np.ndarray, b: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Anytime-valid interval for mean(a - b) of paired bits (a_i, b_i in {0, 1}), in [-1, 1]:
    the betting CS of (a - b + 1) / 2, mapped back."""
    low, high = betting_cs((np.asarray(a, float) - np.asarray(b, float) + 1) / 2, confidence)
    return 2 * low - 1, 2 * high - 1


def coverage_simulation(rates: list[float], streams: int = 2000, length: int = 500, confidence: float = DEFAULT_CONFIDENCE,
                        seed: int = 0) -> dict[float, float]:
    """Empirical *anytime* coverage per true rate: the share of Bernoulli(rate) streams whose
    confidence sequence contains the rate at every one of the ``length`` steps."""
    alpha = 1 - check_confidence(confidence)
    rng = np.random.default_rng(seed)
    out = {}
    for p in rates:
        x = (rng.random((streams, length)) < p).astype(float)
        never_rejected = log_capital(x, p, alpha)[..., 0] < math.log(1 / alpha)
        out[p] = float(never_rejected.mean())
    return out


def anytime_p_value(x: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Anytime-valid two-sided p-value that a stream in [0, 1] (in arrival order) has mean 1/2.

    The hedged betting capital at m = 1/2 is a nonnegative martingale with initial value 1 under the null, so by
    Ville's inequality P(sup_t K_t >= 1/p) <= p for every p: 1 / sup_t K_t is a p-value that stays valid whenever
    the stream was stopped, however the stop was chosen. It is the test behind :func:`paired_difference_cs`:
    p < 1 - confidence exactly when that sequence has excluded 0 (the bets are tuned to ``confidence``).
    """
    alpha = 1 - check_confidence(confidence)
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        return 1.0
    return float(min(1.0, math.exp(-float(log_capital(x, 0.5, alpha)[0]))))


def class_balance_weights(labels: np.ndarray) -> np.ndarray:
    """Per image, how many images' worth of a class-balanced mean it stands for: 1 / (classes x its class's share),
    the shares smoothed by one image per class, (n_c + 1) / (n + classes), so that a class seen once early in a
    stream does not dominate it. A stream of correctness (or of a paired difference) times these weights has the
    class-balanced mean as its mean when the shares are the population's; under "the two models are equally good on
    every class" any weights that depend on the labels alone keep a paired difference's mean at 0, which is what the
    anytime-valid tests need."""
    y = np.asarray(labels)
    if y.size == 0:
        return np.zeros(0)
    _, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    share = (counts + 1.0) / (y.size + counts.size)
    return 1.0 / (counts.size * share[codes])


def weighted_difference_stream(diff: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A paired difference (A right - B right, in [-1, 1]) times class-balance weights, scaled into [0, 1] with 1/2
    meaning "no difference": the stream :func:`anytime_p_value` tests."""
    bound = float(np.max(weights)) if np.size(weights) else 1.0
    return (np.asarray(diff, dtype=float) * np.asarray(weights, dtype=float) / bound + 1) / 2
