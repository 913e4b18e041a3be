"""Projected Displacement threat: definitions, paper properties, projections, run helpers.

References are independent: a direct per-anchor float64 loop, brute-force k-centre,
scipy's SLSQP for projections, scipy's cdist for class distances, and the exact threat d*
of a synthetic 2-D task computed by ray marching (Theorem 1).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.spatial.distance import cdist

from domainbench.errors import UserInputError
from domainbench.metrics.threat import (
    AnchorWarning,
    ProjectedDisplacement,
    ThreatInputError,
    euclidean_class_distances,
    max_safe_severity,
    project_exact,
    project_radial,
    relative_class_weights,
    safe_accuracy,
    select_anchor_indices,
    select_anchors,
    severity_safety,
    unsafe_reference_threat,
)
from domainbench.metrics.threat_projection import project_halfspaces
from tests.oracles.pd_threat_loop import threat_per_anchor_loop

SHAPE = (3, 8, 8)


def smooth_images(rng: np.random.Generator, n: int, shape=SHAPE) -> np.ndarray:
    """Images in [0, 1] with spatial structure (low-frequency fields plus a little noise)."""
    c, h, w = shape
    coarse = rng.random((n, c, 3, 3))
    up = np.kron(coarse, np.ones((1, 1, math.ceil(h / 3), math.ceil(w / 3))))[:, :, :h, :w]
    return np.clip(0.8 * up + 0.2 * rng.random((n, c, h, w)), 0, 1).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    n_cls, per = 5, 14
    labels = np.repeat(np.arange(n_cls), per)
    # class-dependent mean colour, so classes differ as in real data
    images = smooth_images(rng, n_cls * per)
    images = np.clip(images * 0.7 + 0.3 * (labels[:, None, None, None] / n_cls), 0, 1).astype(np.float32)
    anchors, anchor_labels = select_anchors(images, labels, k=8)
    pd = ProjectedDisplacement(anchors, anchor_labels, chunk_size=11)
    x = smooth_images(rng, 24)
    y = rng.integers(0, n_cls, 24)
    deltas = {
        "noise": rng.normal(0, 0.1, x.shape).astype(np.float32),
        "brightness": np.full(x.shape, 0.2, np.float32),
        "towards_anchor": (anchors[rng.integers(0, len(anchors), 24)] - x) * 0.3,
    }
    return dict(images=images, labels=labels, anchors=anchors, anchor_labels=anchor_labels, pd=pd, x=x, y=y,
                deltas=deltas, rng=rng)


def rel_close(a, b, rtol=1e-5, atol=1e-7) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all(np.abs(a - b) <= rtol * np.abs(b) + atol))


# --------------------------------------------------------------------------- anchors


def test_k_centre_hand_worked_order():
    # unit vectors at 0, 5, 10, 60, 85, 90 degrees; mean direction ≈ 41.7° -> start at 60°,
    # farthest from {60} is 0°, then farthest from {60, 0} is 90°.
    ang = np.deg2rad([0, 5, 10, 60, 85, 90])
    pts = np.stack([np.cos(ang), np.sin(ang)], 1) * np.array([1, 2, 3, 4, 5, 6])[:, None]  # norms do not matter
    idx = select_anchor_indices(pts, np.zeros(6, int), k=3)
    assert idx.tolist() == [3, 0, 5]


def test_k_centre_is_a_2_approximation_of_the_optimum():
    # Gonzalez's greedy on the angular metric arccos(cos): radius <= 2 x the optimal radius
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(11, 4))
    unit = pts / np.linalg.norm(pts, axis=1, keepdims=True)
    ang = np.arccos(np.clip(unit @ unit.T, -1, 1))

    def radius(sub):
        return ang[:, list(sub)].min(axis=1).max()

    for k in (2, 3, 4):
        greedy = select_anchor_indices(pts, np.zeros(11, int), k=k)
        assert len(set(greedy.tolist())) == k
        best = min(radius(s) for s in itertools.combinations(range(11), k))
        assert radius(greedy) <= 2 * best + 1e-9


def test_select_anchors_per_class_rows_and_grouping(data):
    a, al = data["anchors"], data["anchor_labels"]
    assert a.shape == (40,) + SHAPE and a.dtype == np.float32
    assert al.tolist() == np.repeat(np.arange(5), 8).tolist()
    idx = select_anchor_indices(data["images"], data["labels"], k=8)
    np.testing.assert_array_equal(a, data["images"][idx])
    assert np.all(data["labels"][idx] == al) and len(set(idx.tolist())) == 40


def test_small_class_uses_all_images_and_warns():
    rng = np.random.default_rng(0)
    imgs = rng.random((7, 2, 3)).astype(np.float32)
    labels = np.array(["a", "a", "a", "a", "a", "b", "b"])
    with pytest.warns(AnchorWarning, match="'b' \\(2\\)"):
        anchors, al = select_anchors(imgs, labels, k=3)
    assert al.tolist() == ["a", "a", "a", "b", "b"]
    assert {tuple(v.ravel()) for v in anchors[3:]} == {tuple(v.ravel()) for v in imgs[5:]}


@pytest.mark.parametrize(
    "images,labels,k,match",
    [
        (np.zeros((4, 2, 2)), None, 2, "needs class labels"),
        ([np.zeros((2, 2)), np.zeros((3, 2))], [0, 1], 1, "mixed sizes"),
        (np.zeros((4, 2, 2)), [0, 1], 1, "one label per image"),
        (np.zeros((4, 2, 2)), [0, 1, 0, 1], 0, "positive integer"),
        (np.full((2, 2), np.nan), [0, 1], 1, "NaN"),
    ],
)
def test_select_anchors_bad_input(images, labels, k, match):
    with pytest.raises(ThreatInputError, match=match):
        select_anchors(images, labels, k)
    assert issubclass(ThreatInputError, UserInputError)


# --------------------------------------------------------------------------- threat vs loop


@pytest.mark.parametrize("kind", ["noise", "brightness", "towards_anchor"])
def test_matrix_form_equals_direct_loop(data, kind):
    pd, x, y, d = data["pd"], data["x"], data["y"], data["deltas"][kind]
    got = pd.threat(x, y, d)
    ref = threat_per_anchor_loop(data["anchors"], data["anchor_labels"], x, y, d)
    assert got.shape == (24,) and got.dtype == np.float32
    assert ref.max() > 0.05
    assert rel_close(got, ref)
    # chunking does not change the result; torch (CPU here, CUDA alike) agrees
    whole = ProjectedDisplacement(data["anchors"], data["anchor_labels"], chunk_size=10_000).threat(x, y, d)
    assert rel_close(whole, ref)
    tt = pd.threat(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(d))
    assert isinstance(tt, torch.Tensor) and tt.dtype == torch.float32
    assert rel_close(tt.numpy(), ref)


def test_autocast_does_not_lower_the_precision(data):
    x, y, d = data["x"], data["y"], data["deltas"]["noise"]
    ref = threat_per_anchor_loop(data["anchors"], data["anchor_labels"], x, y, d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tt = data["pd"].threat(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(d))
    assert tt.dtype == torch.float32 and rel_close(tt.numpy(), ref)


def test_near_duplicate_of_other_class_anchor_is_recomputed_exactly(data, monkeypatch):
    a, al = data["anchors"], data["anchor_labels"]
    rng = np.random.default_rng(1)
    x = a[[0, 9, 17]] + rng.normal(0, 1e-3, (3,) + SHAPE).astype(np.float32)
    y = np.array([1, 2, 3])  # each x is a near copy of an anchor of another class
    d = 0.5 * (a[[0, 9, 17]] - x) + rng.normal(0, 1e-4, x.shape).astype(np.float32)
    got = data["pd"].threat(x, y, d)
    ref = threat_per_anchor_loop(a, al, x, y, d)
    assert ref.min() > 0.5  # dominated by the near anchor: tiny ||a - x||² in the denominator
    assert rel_close(got, ref)
    tt = data["pd"].threat(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(d))
    assert rel_close(tt.numpy(), ref)
    # without the direct recompute, the expanded float32 distance loses the digits
    import domainbench.metrics.threat as threat_module
    monkeypatch.setattr(threat_module, "RECOMPUTE_REL", -1.0)
    naive = data["pd"].threat(x, y, d)
    assert np.max(np.abs(naive - ref) / ref) > 1e-3


def test_input_identical_to_other_class_anchor_ignores_that_anchor(data):
    a, al = data["anchors"], data["anchor_labels"]
    x, y = a[[3]], np.array([2])  # anchor 3 is class 0
    d = data["deltas"]["noise"][:1]
    got = data["pd"].threat(x, y, d)
    keep = np.arange(len(a)) != 3
    without = ProjectedDisplacement(a[keep], al[keep]).threat(x, y, d)
    assert np.isfinite(got).all() and got[0] > 0
    assert rel_close(got, without) and rel_close(got, threat_per_anchor_loop(a, al, x, y, d))


# --------------------------------------------------------------------------- paper properties


def test_linear_growth(data):
    pd, x, y = data["pd"], data["x"], data["y"]
    for d in data["deltas"].values():
        base = pd.threat(x, y, d)
        for t in (0.0, 0.5, 3.7):
            assert rel_close(pd.threat(x, y, np.float32(t) * d), t * base, rtol=2e-6, atol=1e-7)


def test_threat_is_sublinear_so_sublevel_sets_are_convex(data):
    pd, x, y, rng = data["pd"], data["x"], data["y"], np.random.default_rng(5)
    for _ in range(5):
        d1 = rng.normal(0, 0.2, x.shape).astype(np.float32)
        d2 = (data["deltas"]["towards_anchor"] * rng.uniform(0.5, 2)).astype(np.float32)
        # scale both into the 1-sublevel set, then any convex combination stays in it
        f1 = project_radial(pd, x, y, d1, 1.0)
        f2 = project_radial(pd, x, y, d2, 1.0)
        assert pd.threat(x, y, f1).max() <= 1 + 1e-5 and pd.threat(x, y, f2).max() <= 1 + 1e-5
        lam = np.float32(rng.uniform())
        assert pd.threat(x, y, 0.5 * f1 + 0.5 * f2).max() <= 1 + 1e-5
        assert pd.threat(x, y, lam * f1 + (1 - lam) * f2).max() <= 1 + 1e-5
        # stronger: d is convex (max of linear maps, positively homogeneous)
        comb = pd.threat(x, y, lam * d1 + (1 - lam) * d2)
        assert np.all(comb <= lam * pd.threat(x, y, d1) + (1 - lam) * pd.threat(x, y, d2) + 1e-5)


def test_moving_onto_an_anchor_of_another_class_has_threat_at_least_1_over_beta(data):
    a, al, x, y = data["anchors"], data["anchor_labels"], data["x"], data["y"]
    for beta in (0.5, 0.8):
        pd = ProjectedDisplacement(a, al, beta=beta)
        for j in range(len(a)):
            rows = y != al[j]
            d = a[j][None] - x[rows]
            t = pd.threat(x[rows], y[rows], d)
            assert np.all(t >= (1 / beta) * (1 - 1e-5))  # the anchor itself gives exactly 1/β
            assert rel_close(t, threat_per_anchor_loop(a, al, x[rows], y[rows], d, beta=beta))


def test_every_different_class_pair_exceeds_1_when_all_images_are_anchors():
    rng = np.random.default_rng(2)
    imgs = smooth_images(rng, 18, (1, 5, 5))
    labels = np.repeat([0, 1, 2], 6)
    pd = ProjectedDisplacement(*select_anchors(imgs, labels, k=6))
    i, j = np.nonzero(labels[:, None] != labels[None, :])
    t = pd.threat(imgs[i], labels[i], imgs[j] - imgs[i])
    assert t.min() >= 2 * (1 - 1e-5) and t.size == 18 * 12
    assert unsafe_reference_threat(imgs, labels, pd, n_pairs=50) >= 2 * (1 - 1e-5)


# --------------------------------------------------------------------------- Theorem 1 (2-D)


def _true_label(p: np.ndarray) -> np.ndarray:
    return np.where(p[..., 1] > 0.5 + 0.15 * np.sin(2 * np.pi * p[..., 0]), 1, -1)


def _in_domain(p: np.ndarray) -> np.ndarray:
    return np.all((p >= 0) & (p <= 1), axis=-1)


def _exact_normalisation(x: np.ndarray, dirs: np.ndarray, step: float = 2e-3):
    """g*(x, u) by ray marching + bisection; unsafe[k] iff the ray meets another class in X."""
    y = _true_label(x)
    ts = np.arange(step, 1.5, step)
    pts = x[None, None, :] + ts[None, :, None] * dirs[:, None, :]
    flip = _in_domain(pts) & (_true_label(pts) != y)
    # the square is convex: once outside, a ray never re-enters, so any flip is in X
    unsafe = flip.any(axis=1)
    first = np.where(unsafe, flip.argmax(axis=1), 0)
    lo, hi = ts[first] - step, ts[first]
    for _ in range(30):
        mid = (lo + hi) / 2
        f = _true_label(x[None] + mid[:, None] * dirs) != y
        hi, lo = np.where(f, mid, hi), np.where(f, lo, mid)
    return unsafe, hi


def _exact_threat(x, deltas, dirs, unsafe, g):
    proj = np.maximum(deltas @ dirs[unsafe].T, 0)
    return (proj / g[unsafe][None, :]).max(axis=1)


def test_theorem_1_true_labelling_is_1_robust_and_violations_are_misclassifications():
    ang = np.linspace(0, 2 * np.pi, 1440, endpoint=False)
    dirs = np.stack([np.cos(ang), np.sin(ang)], 1)
    grid = np.stack(np.meshgrid(np.linspace(0.01, 0.99, 45), np.linspace(0.01, 0.99, 45)), -1).reshape(-1, 2)
    wrong = lambda p: np.where(p[..., 1] > 0.6, 1, -1)  # noqa: E731 -- an imperfect classifier h
    rng = np.random.default_rng(0)
    xs = rng.uniform(0.05, 0.95, (10, 2))
    n_inside = n_violations = 0
    for x in xs:
        y = _true_label(x)
        unsafe, g = _exact_normalisation(x, dirs)
        deltas = grid - x
        d_star = _exact_threat(x, deltas, dirs, unsafe, g)
        other = _true_label(grid) != y
        # Part I: every point of another class is beyond threat 1 (grid directions: margin)
        assert d_star[other].min() > 0.98
        # hence the 1-sublevel set (inside X) keeps the true label
        inside = d_star <= 0.98
        assert np.all(_true_label(grid[inside]) == y)
        n_inside += int(inside.sum())
        # Part II: wherever h is not 1-robust, the violating point is misclassified by h
        viol = inside & (wrong(grid) != y)
        assert np.all(wrong(grid[viol]) != _true_label(grid[viol]))
        n_violations += int(viol.sum())
    assert n_inside > 500 and n_violations > 0  # neither statement holds vacuously


def test_empirical_pd_with_beta_1_is_below_the_exact_threat():
    # paper, "Quality of approximation": g*(x, u) <= ||a - x|| for anchor directions, so
    # d_{PD,k,1} <= d*; checked on the 2-D task with d* over grid + anchor directions
    rng = np.random.default_rng(4)
    pts = rng.uniform(0, 1, (300, 2))
    labels = _true_label(pts)
    anchors, al = select_anchors(pts, labels, k=15)
    pd = ProjectedDisplacement(anchors, al, beta=1.0)
    ang = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    grid_dirs = np.stack([np.cos(ang), np.sin(ang)], 1)
    for x in rng.uniform(0.05, 0.95, (6, 2)):
        y = _true_label(x)
        other = anchors[al != y]
        a_dirs = (other - x) / np.linalg.norm(other - x, axis=1, keepdims=True)
        dirs = np.vstack([grid_dirs, a_dirs])
        unsafe, g = _exact_normalisation(x, dirs, step=1e-3)
        assert np.all(unsafe[720:]) and np.all(g[720:] <= np.linalg.norm(other - x, axis=1) + 1e-6)
        deltas = rng.normal(0, 0.3, (50, 2))
        emp = pd.threat(np.repeat(x[None], 50, 0), np.full(50, y), deltas)
        assert np.all(emp <= _exact_threat(x, deltas, dirs, unsafe, g) * (1 + 1e-5) + 1e-7)


# --------------------------------------------------------------------------- PD-S and PD-W


def test_pd_s_mask(data):
    pd, a, al, x, y = data["pd"], data["anchors"], data["anchor_labels"], data["x"], data["y"]
    rng = np.random.default_rng(6)
    mask = np.zeros((24, 1, 8, 8), bool)
    mask[:, :, 2:6, 2:6] = True  # foreground square, shared by the channels
    d = rng.normal(0, 0.1, x.shape).astype(np.float32)
    got = pd.threat(x, y, d, mask=mask)
    assert rel_close(got, threat_per_anchor_loop(a, al, x, y, d, mask=mask))
    # background-only corruption is invisible to PD-S, not to PD
    bg = d * ~mask
    assert np.all(pd.threat(x, y, bg, mask=mask) == 0) and np.sum(pd.threat(x, y, bg) > 0) >= 20
    # an all-ones mask is plain PD; torch agrees
    assert rel_close(pd.threat(x, y, d, mask=np.ones_like(mask)), pd.threat(x, y, d))
    tt = pd.threat(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(d), mask=torch.from_numpy(mask))
    assert rel_close(tt.numpy(), got)


def test_euclidean_class_distances_and_relative_weights(data):
    a, al = data["anchors"], data["anchor_labels"]
    dist, classes = euclidean_class_distances(a, al)
    flat = a.reshape(len(a), -1).astype(np.float64)
    for y in range(5):
        for c in range(5):
            assert dist[y, c] == pytest.approx(cdist(flat[al == y], flat[al == c]).mean(), rel=1e-6)
    w = relative_class_weights(np.array([[0, 1, 3, 5], [1, 0, 2, 2], [3, 2, 0, 9], [5, 2, 9, 0]]), min_weight=0.1)
    np.testing.assert_allclose(w[0], [1, 0.1, 0.5, 1])
    np.testing.assert_allclose(w[1], [0.1, 1, 1, 1])  # equidistant others -> 1
    np.testing.assert_allclose(w[3], [3 / 7, 0.1, 1, 1])


def test_pd_w_equals_loop_and_is_at_least_pd(data):
    a, al, x, y = data["anchors"], data["anchor_labels"], data["x"], data["y"]
    pdw = ProjectedDisplacement(a, al, class_weights="euclidean")
    w = pdw.class_weights
    assert w.min() >= 0.05 and w.max() <= 1
    np.testing.assert_allclose(w, relative_class_weights(euclidean_class_distances(a, al)[0]))
    for d in data["deltas"].values():
        got = pdw.threat(x, y, d)
        assert rel_close(got, threat_per_anchor_loop(a, al, x, y, d, class_weights=w))
        assert np.all(got >= data["pd"].threat(x, y, d) * (1 - 1e-6))  # W <= 1
    # a user matrix: doubling a weight halves that class's contribution
    user = np.full((5, 5), 0.5)
    assert rel_close(ProjectedDisplacement(a, al, class_weights=user).threat(x, y, d), 2 * data["pd"].threat(x, y, d))


# --------------------------------------------------------------------------- projections


def test_exact_projection_matches_slsqp_and_is_the_nearest_feasible_point():
    rng = np.random.default_rng(11)
    shape = (1, 2, 3)  # 6-dimensional inputs: small enough for SLSQP
    imgs = rng.random((12,) + shape).astype(np.float32)
    labels = np.repeat([0, 1, 2], 4)
    pd = ProjectedDisplacement(imgs, labels)
    x, y = rng.random((4,) + shape).astype(np.float32), np.array([0, 1, 2, 0])
    delta = rng.normal(0, 1.0, x.shape).astype(np.float32)
    eps = 0.7
    assert pd.threat(x, y, delta).min() > eps  # every δ starts outside
    z = project_exact(pd, x, y, delta.astype(np.float64), eps)
    zd = project_exact(pd, x, y, delta.astype(np.float64), eps, method="dykstra")
    zr = project_radial(pd, x, y, delta, eps)
    for i in range(4):
        n, b = pd.halfspaces(x[i], y[i], eps)
        d0 = delta[i].ravel().astype(np.float64)
        res = minimize(lambda v: 0.5 * np.sum((v - d0) ** 2), np.zeros(6), jac=lambda v: v - d0,
                       constraints=[{"type": "ineq", "fun": lambda v: b - n @ v, "jac": lambda v: -n}],
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert res.success
        zi = z[i].ravel()
        assert np.all(n @ zi <= b + 1e-9)  # feasible
        np.testing.assert_allclose(zi, res.x, atol=1e-6)
        np.testing.assert_allclose(zd[i].ravel(), zi, atol=1e-7)
        # optimality: <δ - z, p - z> <= 0 for every feasible p (here: random feasible points)
        p = rng.normal(0, 1, (2000, 6))
        p = p[np.all(p @ n.T <= b, axis=1)]
        assert len(p) > 20
        assert np.all((p - zi) @ (d0 - zi) <= 1e-9)
        assert np.linalg.norm(zi - d0) <= np.min(np.linalg.norm(p - d0, axis=1)) + 1e-12
        # the radial projection is feasible but never nearer
        assert np.linalg.norm(zi - d0) <= np.linalg.norm(zr[i].ravel() - d0) + 1e-9
    assert np.all(pd.threat(x, y, z.astype(np.float32)) <= eps * (1 + 1e-5))
    np.testing.assert_allclose(pd.threat(x, y, zr), eps, rtol=1e-5)


def test_exact_projection_on_images_and_pd_s(data):
    pd, x, y = data["pd"], data["x"][:3], data["y"][:3]
    d = (data["deltas"]["towards_anchor"][:3] * 5).astype(np.float32)
    mask = np.zeros((3, 1, 8, 8), np.float32)
    mask[:, :, :4] = 1
    assert pd.threat(x, y, d).min() > 1
    z = project_exact(pd, x, y, d, 1.0)
    assert np.all(pd.threat(x, y, z) <= 1 + 1e-4) and z.dtype == np.float32
    assert np.allclose(project_exact(pd, x, y, z, 1.0), z, atol=1e-5)  # feasible points stay
    zs = project_exact(pd, x, y, d, 0.5, mask=mask)
    assert np.all(pd.threat(x, y, zs, mask=mask) <= 0.5 * (1 + 1e-4))
    np.testing.assert_array_equal((zs - d)[np.broadcast_to(mask, d.shape) == 0], 0)  # only the foreground moves
    zt = project_exact(pd, torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(d), 1.0)
    assert isinstance(zt, torch.Tensor) and np.allclose(zt.numpy(), z, atol=1e-6)


def test_project_halfspaces_hand_worked():
    # project (2, 2) onto {z1 <= 1, z2 <= 1} -> (1, 1); onto {z1 + z2 <= 0} -> (0, 0)
    np.testing.assert_allclose(project_halfspaces(np.array([2.0, 2.0]), np.eye(2), np.ones(2)), [1, 1])
    np.testing.assert_allclose(project_halfspaces(np.array([2.0, 2.0]), np.array([[1.0, 1.0]]), np.zeros(1)), [0, 0],
                               atol=1e-12)
    np.testing.assert_allclose(
        project_halfspaces(np.array([2.0, 2.0]), np.array([[1.0, 1.0], [2.0, 2.0]]), np.array([0.0, 0.0]),
                           method="dykstra"), [0, 0], atol=1e-9)


# --------------------------------------------------------------------------- run helpers


def test_unsafe_reference_threat_matches_mean_over_all_pairs():
    rng = np.random.default_rng(8)
    imgs = smooth_images(rng, 24, (1, 6, 6))
    labels = np.repeat([0, 1, 2], 8)  # balanced: sampling i then j is uniform over pairs
    pd = ProjectedDisplacement(*select_anchors(imgs, labels, k=3))
    i, j = np.nonzero(labels[:, None] != labels[None, :])
    all_t = threat_per_anchor_loop(pd.anchors, pd.anchor_labels, imgs[i], labels[i], imgs[j] - imgs[i])
    est = unsafe_reference_threat(imgs, labels, pd, n_pairs=3000, seed=1)
    assert abs(est - all_t.mean()) < 4 * all_t.std() / math.sqrt(3000)
    assert est == unsafe_reference_threat(imgs, labels, pd, n_pairs=3000, seed=1)
    with pytest.raises(ThreatInputError, match="two classes"):
        unsafe_reference_threat(imgs[:8], labels[:8], pd)


def test_severity_safety_and_safe_accuracy():
    threats = {("blur", 1): 0.2, ("blur", 2): 1.0, ("blur", 3): 1.4, ("fog", 1): 1.2, ("fog", 2): 0.3}
    safety = severity_safety(threats)
    assert safety == {("blur", 1): True, ("blur", 2): True, ("blur", 3): False, ("fog", 1): False, ("fog", 2): True}
    assert severity_safety(threats, threshold=0.25)[("blur", 1)] is True
    assert max_safe_severity(safety) == {"blur": 2, "fog": None}
    acc = {("blur", 1): 0.9, ("blur", 2): 0.7, ("blur", 3): 0.1, ("fog", 1): 0.2, ("fog", 2): 0.5}
    assert safe_accuracy(acc, safety) == pytest.approx((0.9 + 0.7 + 0.5) / 3)
    counts = {k: 10.0 for k in acc} | {("fog", 2): 30.0}
    assert safe_accuracy(acc, safety, counts) == pytest.approx((9 + 7 + 15) / 50)
    assert safe_accuracy({("fog", 1): 0.2}, safety) is None  # nothing safe: not applicable, not 0
    with pytest.raises(ThreatInputError, match="no safety flag"):
        safe_accuracy({("snow", 1): 0.5}, safety)
    with pytest.raises(ThreatInputError, match="finite"):
        severity_safety({("blur", 1): float("nan")})


# --------------------------------------------------------------------------- bad input


def test_threat_bad_inputs(data):
    pd, x, y = data["pd"], data["x"], data["y"]
    d = data["deltas"]["noise"]
    with pytest.raises(ThreatInputError, match="preprocess inputs and anchors identically"):
        pd.threat(x[:, :, :4], y, d[:, :, :4])
    with pytest.raises(ThreatInputError, match="layout"):
        pd.threat(x.transpose(0, 2, 3, 1).copy().reshape(24, 8, 8, 3), y, d.reshape(24, 8, 8, 3))
    with pytest.raises(ThreatInputError, match="same scaling"):
        pd.threat(x * 255, y, d)
    assert pd.threat(x * 255, y, d, check_scale=False).shape == (24,)
    with pytest.raises(ThreatInputError, match="without anchors"):
        pd.threat(x, np.full(24, 9), d)
    with pytest.raises(ThreatInputError, match="needs class labels"):
        pd.threat(x, None, d)
    with pytest.raises(ThreatInputError, match="must match"):
        pd.threat(x, y, d[:3])
    with pytest.raises(ThreatInputError, match="binary"):
        pd.threat(x, y, d, mask=np.full((24, 1, 8, 8), 0.5))
    with pytest.raises(ThreatInputError, match="same number of axes"):
        pd.threat(x, y, d, mask=np.ones((24, 8, 8)))
    with pytest.raises(ThreatInputError, match="NaN"):
        pd.threat(x, y, d * np.nan)
    with pytest.raises(ThreatInputError, match="both"):
        pd.threat(torch.from_numpy(x), y, d)
    with pytest.raises(ThreatInputError, match="at least two classes"):
        ProjectedDisplacement(data["anchors"][:8], data["anchor_labels"][:8])
    with pytest.raises(ThreatInputError, match="> 0 off the diagonal"):
        ProjectedDisplacement(data["anchors"], data["anchor_labels"], class_weights=np.zeros((5, 5)))
    with pytest.raises(ThreatInputError, match=r"shape \(5, 5\)"):
        ProjectedDisplacement(data["anchors"], data["anchor_labels"], class_weights=np.ones((4, 4)))
    with pytest.raises(ThreatInputError, match="beta"):
        ProjectedDisplacement(data["anchors"], data["anchor_labels"], beta=0)
    with pytest.raises(ThreatInputError, match="eps"):
        project_radial(pd, x, y, d, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pd.threat(x, y, d)  # the happy path warns about nothing


# --------------------------------------------------------------------------- the cell verdict (pd_safety)


@pytest.mark.parametrize("n", [1, 5, 20, 40, 64, 200, 1000])
def test_pd_safety_is_the_exact_binomial_test_against_the_cut(n: int) -> None:
    from scipy.stats import binomtest

    from domainbench.metrics.threat import UNSAFE_SHARE_CUT, pd_safety, share_interval

    for k in sorted({*range(min(n, 40) + 1), *range(0, n + 1, max(n // 50, 1)), n}):
        test = binomtest(k, n, UNSAFE_SHARE_CUT, alternative="less"), binomtest(k, n, UNSAFE_SHARE_CUT, alternative="greater")
        # safe: "share >= cut" rejected at 2.5 % one-sided; unsafe: "share <= cut" rejected; else borderline
        expected = "safe" if test[0].pvalue < 0.025 else "unsafe" if test[1].pvalue < 0.025 else "borderline"
        assert pd_safety(k, n) == expected, (k, n)
        ref = binomtest(k, n).proportion_ci(0.95, method="exact")
        assert share_interval(k, n) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_pd_safety_needs_evidence_not_a_mean_below_1() -> None:
    from domainbench.metrics.threat import pd_safety

    assert pd_safety(0, 64) == "safe"  # upper end 1 - 0.025^(1/64) = 5.6 %
    assert pd_safety(0, 20) == "borderline"  # 20 clean images cannot show a share below 10 % (upper end 16.8 %)
    # the cells: 42 % and 67 % of the images above 1 are unsafe whatever their mean threat
    assert pd_safety(84, 200) == pd_safety(134, 200) == "unsafe"
    assert pd_safety(5, 50) == "borderline"  # 10 % exactly: cannot tell
    with pytest.raises(ThreatInputError):
        pd_safety(3, 2)


def test_report_cells_carry_the_verdict_its_interval_and_the_safe_flag_from_the_stored_sums() -> None:
    from scipy.stats import binomtest

    from domainbench.metrics.run_report import threat_cells
    from domainbench.store.records import ThreatRecord

    def rec(corruption: str, shard: int, n: int, above: int) -> ThreatRecord:
        return ThreatRecord(run_id="r", corruption=corruption, severity=1, shard=shard, n=n, sum=0.5 * n, sum_sq=0.3 * n,
                            n_above_1=above, max=1.5)

    # "fog": mean threat 0.5 in both shards, yet 30 of 100 images above 1 (the mean alone called it safe)
    cells = {t.corruption: t for t in threat_cells([rec("fog", 0, 60, 20), rec("fog", 1, 40, 10), rec("haze", 0, 100, 0),
                                                    rec("mist", 0, 30, 2)])}
    assert (cells["fog"].n, cells["fog"].frac_unsafe_images) == (100, 0.3)
    ref = binomtest(30, 100).proportion_ci(0.95, method="exact")
    assert (cells["fog"].frac_unsafe_ci_low, cells["fog"].frac_unsafe_ci_high) == pytest.approx((ref.low, ref.high))
    assert {k: (t.safety, t.safe) for k, t in cells.items()} == {
        "fog": ("unsafe", False), "haze": ("safe", True), "mist": ("borderline", False)}
    with pytest.raises(ValueError, match="contradicts"):
        cells["fog"].model_validate({**cells["fog"].model_dump(), "safe": True})
