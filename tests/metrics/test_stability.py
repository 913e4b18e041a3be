"""Embedding stability metrics: the paper's five properties, exactness against independent
solvers, the duality-gap certificate, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import ortho_group
from sklearn.metrics.pairwise import cosine_similarity

from domainbench.errors import UserInputError
from domainbench.metrics import stability, stability_kernels
from domainbench.metrics.stability import (
    cosine_robustness,
    divergence_radius,
    enclosing_ball,
    euclidean_robustness,
    stability_metrics,
)
from tests.oracles.min_enclosing_ball import meb_radius_nnls as meb_nnls


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny batched ops: threads only add contention on a shared CI box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(params=["cpu_kernels", "torch"])
def solver_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a set is solved: numba kernels (CPU tensors) and the torch path (GPU)."""
    if request.param == "torch":
        monkeypatch.setattr(stability, "_CPU_KERNELS", False)
    return request.param


@pytest.fixture
def torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the torch solver (as on a GPU): the CPU kernel settles most sets before it."""
    monkeypatch.setattr(stability, "_CPU_KERNELS", False)


# --------------------------------------------------------------------------------------
# Independent references
# --------------------------------------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def meb_brute_force(points: np.ndarray) -> float:
    """Smallest, over every subset S, of the ball centred at S's circumcentre (in aff(S))
    that encloses all points. Each candidate encloses everything, and the optimal support
    (affinely independent by Caratheodory) is among the subsets, so the minimum is exact."""
    x = _unit(points.astype(np.float64))
    n, d = x.shape
    best = np.inf
    for k in range(1, min(n, d + 1) + 1):
        for S in itertools.combinations(range(n), k):
            p0, D = x[S[0]], x[list(S[1:])] - x[S[0]]
            if k == 1:
                c = p0
            else:
                A = D @ D.T
                if np.linalg.cond(A) > 1e10:
                    continue
                beta = np.linalg.solve(A, 0.5 * np.diag(A))
                c = p0 + D.T @ beta
            best = min(best, float(np.linalg.norm(x - c, axis=1).max()))
    return best


# --------------------------------------------------------------------------------------
# Generated sets
# --------------------------------------------------------------------------------------


def clustered(rng: np.random.Generator, B: int, n: int, d: int, spread: float) -> np.ndarray:
    """Like real embeddings of perturbed copies: one direction plus relative noise."""
    base = _unit(rng.normal(size=(B, 1, d)))
    return base + spread * rng.normal(size=(B, n, d)) / np.sqrt(d)


def sphere(rng: np.random.Generator, B: int, n: int, d: int) -> np.ndarray:
    return rng.normal(size=(B, n, d))


def great_circle(rng: np.random.Generator, B: int, n: int, d: int, arc: float) -> np.ndarray:
    """n points on one great circle spanning an arc (endpoints included)."""
    out = np.empty((B, n, d))
    for b in range(B):
        q, _ = np.linalg.qr(rng.normal(size=(d, 2)))
        theta = np.concatenate([[0.0, arc], rng.uniform(0.0, arc, size=n - 2)])[:n]
        out[b] = np.cos(theta)[:, None] * q[:, 0] + np.sin(theta)[:, None] * q[:, 1]
    return out


def with_duplicates(rng: np.random.Generator, X: np.ndarray) -> np.ndarray:
    """Copy some embeddings over others (exact duplicates, also of the support points)."""
    X = X.copy()
    n = X.shape[1]
    for b in range(X.shape[0]):
        src = rng.integers(0, n, size=max(1, n // 3))
        dst = rng.integers(0, n, size=src.size)
        X[b, dst] = X[b, src]
        X[b, -1] = X[b, 0]
    return X


def regular_simplex(d: int) -> np.ndarray:
    """d + 1 unit vectors in R^d summing to zero."""
    e = np.eye(d + 1) - 1.0 / (d + 1)
    u, _, _ = np.linalg.svd(e)
    return _unit(e @ u[:, :d])


CASES = [
    (2, 2), (2, 1024), (3, 2), (3, 3), (4, 3), (5, 2), (6, 768), (7, 16), (8, 8),
    (12, 5), (20, 1024), (30, 64), (45, 10), (60, 2), (60, 3), (60, 61), (60, 1024),
]


def _sets(n: int, d: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {
        "clustered": clustered(rng, 3, n, d, 0.3),
        "tight": clustered(rng, 2, n, d, 0.05),
        # Nearly coplanar points on a small cap: flat, ill-conditioned but regular faces.
        "small_cap": clustered(rng, 2, n, d, 0.02),
        "sphere": sphere(rng, 2, n, d),
        "narrow_arc": great_circle(rng, 2, n, d, 0.8),
        "wide_arc": great_circle(rng, 2, n, d, 4.5),
    }
    out["duplicates"] = with_duplicates(rng, out["clustered"])
    out["arc_duplicates"] = with_duplicates(rng, out["narrow_arc"])
    return out


# --------------------------------------------------------------------------------------
# Exactness and the certificate
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "d"), CASES)
def test_radius_matches_independent_solvers(n: int, d: int, solver_path: str) -> None:
    for kind, X in _sets(n, d, seed=1000 * n + d).items():
        radius, lower, upper = divergence_radius(X, return_bounds=True)
        ref = np.array([meb_nnls(x) for x in X])
        np.testing.assert_allclose(radius, ref, rtol=0, atol=1e-9, err_msg=kind)
        assert np.all(upper - lower < 1e-10), (kind, upper - lower)
        assert np.all(lower <= ref + 1e-12) and np.all(ref <= upper + 1e-12), kind
        assert np.all((lower <= radius) & (radius <= upper)), kind
        if n <= 8:
            brute = np.array([meb_brute_force(x) for x in X])
            np.testing.assert_allclose(radius, brute, rtol=0, atol=1e-9, err_msg=kind)


@pytest.mark.parametrize("d", [2, 5, 300])
def test_arc_of_great_circle_has_closed_form_radius(d: int, solver_path: str) -> None:
    """Points on an arc of angle phi <= pi (endpoints included): radius sin(phi / 2);
    arcs beyond a semicircle enclose the origin: radius 1."""
    rng = np.random.default_rng(d)
    for arc in [1e-3, 0.5, 2.0, np.pi - 1e-6]:
        X = great_circle(rng, 3, 17, d, arc)
        np.testing.assert_allclose(divergence_radius(X), np.sin(arc / 2), rtol=0, atol=1e-12)
    X = great_circle(rng, 3, 17, d, 4.0)
    np.testing.assert_allclose(divergence_radius(X), 1.0, rtol=0, atol=1e-12)
    # Tiny spreads keep their relative accuracy (the Gram matrix is centred on a point).
    for arc in [1e-6, 1e-4]:
        X = great_circle(rng, 3, 9, d, arc)
        np.testing.assert_allclose(divergence_radius(X), np.sin(arc / 2), rtol=1e-8)
        np.testing.assert_allclose(cosine_robustness(X), np.sin(arc / 2) ** 2, rtol=1e-8)


def test_weights_satisfy_the_kkt_conditions(solver_path: str) -> None:
    """The dual weights describe the ball: centre = sum a_i x_i, every point inside,
    every weighted point on the surface."""
    rng = np.random.default_rng(7)
    X = with_duplicates(rng, clustered(rng, 20, 9, 40, 0.4))
    ball = enclosing_ball(X)
    x = _unit(X)
    assert np.all(ball.weights >= 0) and np.allclose(ball.weights.sum(1), 1.0, atol=1e-14)
    centre = np.einsum("bn,bnd->bd", ball.weights, x)
    dist = np.linalg.norm(x - centre[:, None, :], axis=2)
    assert np.all(dist <= ball.radius[:, None] + 1e-12)
    on = ball.weights > 1e-9
    assert np.all(np.abs(dist - ball.radius[:, None])[on] < 1e-9)


@pytest.mark.parametrize("passes", [0, 1, 2])
def test_frank_wolfe_path_reaches_the_same_radius(passes: int, torch_path: None) -> None:
    """With few or no active-set passes between them, Frank-Wolfe steps do the work."""
    rng = np.random.default_rng(8)
    X = np.concatenate([clustered(rng, 4, 12, 30, 0.5), great_circle(rng, 2, 12, 30, 2.5)])
    ball = enclosing_ball(X, active_set_passes=passes, tol=1e-10)
    ref = np.array([meb_nnls(x) for x in X])
    assert ball.iterations > 0
    np.testing.assert_allclose(ball.radius, ref, rtol=0, atol=1e-9)
    assert np.all(ball.gap < 1e-10)


def test_certificate_stays_valid_when_stopped_early() -> None:
    rng = np.random.default_rng(9)
    X = sphere(rng, 6, 20, 40)
    with pytest.warns(RuntimeWarning, match="still valid"):
        ball = enclosing_ball(X, active_set_passes=0, max_iter=3)
    ref = np.array([meb_nnls(x) for x in X])
    assert not ball.converged.all()
    assert np.all(ball.lower <= ref + 1e-12) and np.all(ref <= ball.upper + 1e-12)
    assert np.all(ball.gap > 1e-6)  # really unfinished: the bounds are not trivially tight


def test_cpu_kernel_gram_matches_the_torch_path() -> None:
    """The fused numba Gram against the chunked torch one (normalise, centre, bmm)."""
    rng = np.random.default_rng(21)
    for n, d, dtype in [(2, 1, np.float64), (6, 768, np.float32), (17, 100, np.float64),
                        (60, 1280, np.float32), (5, 3, np.float32)]:
        X = np.concatenate([clustered(rng, 7, n, d, 0.3), sphere(rng, 3, n, d)]).astype(dtype)
        kernel = stability._centred_gram(X).numpy()
        ref = stability._centred_gram_torch(torch.from_numpy(X), "X").numpy()
        assert kernel.dtype == np.float64 and kernel.shape == (10, n, n)
        np.testing.assert_allclose(kernel, ref, rtol=0, atol=1e-14 * max(1.0, np.abs(ref).max()))
        assert np.all(kernel[:, 0, :] == 0) and np.all(kernel[:, :, 0] == 0)
        np.testing.assert_array_equal(kernel, kernel.transpose(0, 2, 1))


def test_extreme_magnitudes_take_the_careful_path() -> None:
    """Norms that overflow or underflow float64 squares: the kernel hands the batch to the
    torch path, which rescales those rows; the result equals the moderate-scale one."""
    rng = np.random.default_rng(22)
    X = clustered(rng, 6, 5, 40, 0.3)
    expected = divergence_radius(X)
    for factor in (1e200, 1e-200):
        Y = X.copy()
        Y[2] *= factor
        np.testing.assert_allclose(divergence_radius(Y), expected, rtol=0, atol=1e-14)


def _kernel_solve(X: np.ndarray, **kw: object) -> tuple[np.ndarray, ...]:
    G = stability._centred_gram(X).numpy()
    B, n, _ = G.shape
    a, L, U = np.full((B, n), -1.0), np.full(B, -1.0), np.full(B, -1.0)
    done = np.ones(B, dtype=bool)
    opts = {"tol": 1e-12, "pivot_rtol": 1e-11, "max_passes": 2 * n + 8, "full_first": True} | kw
    stability_kernels.active_set_solve(
        G, opts["tol"], opts["pivot_rtol"], opts["max_passes"], opts["full_first"], a, L, U, done
    )
    return G, a, L, U, done


@pytest.mark.parametrize("full_first", [True, False])
def test_active_set_kernel_certifies_exact_balls(full_first: bool) -> None:
    """The CPU kernel on its own: every set it reports done has the exact radius (NNLS),
    a gap within tol and KKT weights; untouched outputs where it hands a set on."""
    rng = np.random.default_rng(23)
    groups = {
        "sphere": sphere(rng, 20, 5, 20),
        "clustered": clustered(rng, 20, 12, 40, 0.3),
        "many_low_dim": sphere(rng, 10, 40, 3),
        "arc": great_circle(rng, 10, 9, 30, 2.0),
        "wide": clustered(rng, 5, 60, 200, 0.5),
    }
    for kind, X in groups.items():
        G, a, L, U, done = _kernel_solve(X, full_first=full_first)
        assert done.all(), kind  # general position: the kernel settles every set
        scale = np.einsum("bii->bi", G).max(axis=1)
        ref = np.array([meb_nnls(x) for x in X])
        np.testing.assert_allclose(np.sqrt(L), ref, rtol=0, atol=1e-12, err_msg=kind)
        assert np.all((U - L >= 0) & (U - L <= 1e-12 * scale)), kind
        assert np.all(a >= 0) and np.allclose(a.sum(1), 1.0, atol=1e-14), kind
        for b in range(len(X)):
            grad = np.diag(G[b]) - 2 * G[b] @ a[b]
            on = a[b] > 0
            assert np.ptp(grad[on]) < 1e-12 * scale[b] and grad.max() <= grad[on].max() + 1e-12

    # Points on one face in general position: the full-face solve equals LAPACK's.
    X = sphere(rng, 40, 5, 20)
    G, a, L, U, done = _kernel_solve(X)
    on_the_ball = 0
    for b in range(len(X)):
        Gs = G[b] / np.diag(G[b]).max()
        M = np.block([[2 * Gs, np.ones((5, 1))], [np.ones((1, 5)), np.zeros((1, 1))]])
        w = np.linalg.solve(M, np.append(np.diag(Gs), 1.0))[:5]
        if np.all(w >= 0):
            on_the_ball += 1
            np.testing.assert_allclose(a[b], w, rtol=0, atol=1e-12)
        else:  # some point inside: its weight is exactly zero
            assert np.any(a[b] == 0.0)
    assert 5 < on_the_ball < 40


def test_active_set_kernel_hands_on_what_it_cannot_settle() -> None:
    rng = np.random.default_rng(24)
    X = sphere(rng, 4, 6, 10)
    # All points coincide (zero Gram): the torch solver's exact pair start handles it.
    same = np.repeat(X[:, :1], 6, axis=1)
    _, a, L, U, done = _kernel_solve(same)
    assert not done.any() and np.all(a == -1.0) and np.all(L == -1.0) and np.all(U == -1.0)
    # No passes and no full-face try: nothing is settled, nothing is written.
    _, a, L, _, done = _kernel_solve(X, max_passes=0, full_first=False)
    assert not done.any() and np.all(a == -1.0) and np.all(L == -1.0)


def test_batching_does_not_change_results() -> None:
    rng = np.random.default_rng(3)
    X = np.concatenate([clustered(rng, 5, 6, 32, 0.2), sphere(rng, 5, 6, 32)])
    together = divergence_radius(X)
    alone = np.array([divergence_radius(x[None])[0] for x in X])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-13)


# --------------------------------------------------------------------------------------
# The paper's five properties
# --------------------------------------------------------------------------------------


def test_bounded_domain() -> None:
    rng = np.random.default_rng(11)
    X = np.concatenate(
        [sphere(rng, 20, 8, 3), clustered(rng, 20, 8, 3, 1.0), great_circle(rng, 20, 8, 3, 5.0)]
    )
    X[0, 1] = -X[0, 0]  # an antipodal pair: every metric is exactly at its maximum
    m = stability_metrics(X)
    for name in ("divergence_radius", "cosine", "euclidean"):
        assert np.all((m[name] >= 0.0) & (m[name] <= 1.0)), name
    assert m["divergence_radius"][0] == pytest.approx(1.0, abs=1e-15)


def test_monotone_as_the_domain_grows() -> None:
    """Nested sets K1 subset K2 (growing prefixes, as a parameter grid is extended)."""
    rng = np.random.default_rng(12)
    X = np.concatenate([clustered(rng, 10, 12, 5, 0.5), sphere(rng, 4, 12, 5)])
    dr = np.stack([divergence_radius(X[:, :k]) for k in range(2, 13)], axis=1)
    cs = np.stack([cosine_robustness(X[:, :k]) for k in range(2, 13)], axis=1)
    assert np.all(np.diff(dr, axis=1) >= -1e-12)
    assert np.all(np.diff(cs, axis=1) >= -1e-15)
    assert np.any(np.diff(dr, axis=1) > 1e-3)  # it does grow somewhere: not a constant


def test_zero_when_all_embeddings_coincide(solver_path: str) -> None:
    rng = np.random.default_rng(13)
    v = rng.normal(size=(4, 1, 768))
    # Positive rescalings are the same embedding after normalisation.
    X = np.concatenate([v, 2.0 * v, 0.5 * v, v], axis=1)
    m = stability_metrics(X)
    assert np.all(m["divergence_radius"] == 0.0)
    assert np.all(m["cosine"] == 0.0) and np.all(m["euclidean"] == 0.0)
    assert np.all(divergence_radius(np.concatenate([v, 3.0 * v], axis=1)) < 1e-15)


def test_one_when_a_subset_sums_to_zero() -> None:
    """Worst robustness: if some subset of the embeddings sums to 0, R_dr = 1; R_cs fails
    the property (the paper's Figure 1: three vectors at 120 degrees give R_cs = 0.75)."""
    rng = np.random.default_rng(14)
    d = 50
    q, _ = np.linalg.qr(rng.normal(size=(d, 2)))
    ang = np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3])
    tri = np.cos(ang)[:, None] * q[:, 0] + np.sin(ang)[:, None] * q[:, 1]
    extra = rng.normal(size=(4, d))
    sets = [tri, np.concatenate([extra, tri]), np.concatenate([extra[:3], tri[:1], -tri[:1]])]
    for s in sets:
        assert divergence_radius(s[None])[0] == pytest.approx(1.0, abs=1e-12)
    assert cosine_robustness(tri[None])[0] == pytest.approx(0.75, abs=1e-12)
    for dim in (2, 3, 10):
        simplex = regular_simplex(dim)
        assert np.abs(simplex.sum(0)).max() < 1e-12
        assert divergence_radius(simplex[None])[0] == pytest.approx(1.0, abs=1e-12)
        # min cosine of a regular simplex is -1/d: R_cs = (1 + 1/d) / 2 < 1.
        assert cosine_robustness(simplex[None])[0] == pytest.approx((1 + 1 / dim) / 2, abs=1e-12)


def test_invariant_to_rotations() -> None:
    rng = np.random.default_rng(15)
    d = 24
    X = np.concatenate([clustered(rng, 6, 7, d, 0.5), great_circle(rng, 2, 7, d, 2.0)])
    M = ortho_group.rvs(d, random_state=15)
    XR = X @ M.T
    np.testing.assert_allclose(divergence_radius(XR), divergence_radius(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cosine_robustness(XR), cosine_robustness(X), rtol=0, atol=1e-14)


# --------------------------------------------------------------------------------------
# R_cs and R_ed
# --------------------------------------------------------------------------------------


def test_cosine_and_euclidean_against_direct_formulas() -> None:
    rng = np.random.default_rng(16)
    X = np.concatenate([clustered(rng, 6, 6, 100, 0.6), sphere(rng, 3, 6, 100)])
    cs, ed = cosine_robustness(X), euclidean_robustness(X)
    cs_ref = np.array([(1.0 - cosine_similarity(x).min()) / 2.0 for x in X])
    ed_ref = np.array([pdist(_unit(x)).max() / 2.0 for x in X])
    np.testing.assert_allclose(cs, cs_ref, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ed, ed_ref, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(ed, np.sqrt(cs))  # Theorem 2, to the last bit
    # DivergenceRadius sits between half the diameter and Jung's bound.
    dr = divergence_radius(X)
    n = X.shape[1]
    assert np.all(dr >= ed - 1e-14)
    assert np.all(dr <= 2 * ed * np.sqrt(n / (2 * (n + 1))) + 1e-14)


def test_stability_metrics_one_call() -> None:
    rng = np.random.default_rng(17)
    clean = rng.normal(size=(5, 32))
    perturbed = clean[:, None, :] + 0.3 * rng.normal(size=(5, 4, 32))
    m = stability_metrics(perturbed, clean=clean)
    assert set(m) == {"divergence_radius", "cosine", "euclidean", "gap"}
    full = np.concatenate([clean[:, None, :], perturbed], axis=1)
    np.testing.assert_array_equal(m["divergence_radius"], divergence_radius(full))
    np.testing.assert_array_equal(m["cosine"], cosine_robustness(full))
    np.testing.assert_array_equal(m["euclidean"], euclidean_robustness(full))
    assert all(v.shape == (5,) and v.dtype == np.float64 for v in m.values())
    assert np.all((m["gap"] >= 0) & (m["gap"] < 1e-10))
    assert stability_metrics(np.zeros((0, 3, 4)))["divergence_radius"].shape == (0,)


def test_torch_input_equals_numpy_input() -> None:
    rng = np.random.default_rng(18)
    X = clustered(rng, 8, 6, 48, 0.4)
    for arr in (X, X.astype(np.float32)):
        t = torch.from_numpy(arr)
        np.testing.assert_array_equal(divergence_radius(t), divergence_radius(arr))
        np.testing.assert_array_equal(cosine_robustness(t), cosine_robustness(arr))
        np.testing.assert_array_equal(
            stability_metrics(t)["euclidean"], stability_metrics(arr)["euclidean"]
        )
    out = divergence_radius(torch.from_numpy(X), return_bounds=True)
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float64 for v in out)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_input_equals_cpu_input() -> None:
    rng = np.random.default_rng(19)
    X = np.concatenate([clustered(rng, 50, 6, 768, 0.3), great_circle(rng, 5, 6, 768, 4.0)])
    gpu = stability_metrics(torch.from_numpy(X).cuda())
    cpu = stability_metrics(X)
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.array([[[1.0, np.nan], [0.0, 1.0]]]), "NaN or inf"),
        (np.array([[[1.0, np.inf], [0.0, 1.0]]]), "NaN or inf"),
        (np.array([[[1.0, 2.0], [0.0, 0.0]]]), "all zeros"),
        (np.ones((3, 1, 8)), "at least 2 embeddings"),
        (np.ones((3, 8)), r"\(B, n, d\).*embeddings\[None\]"),
        (np.ones((2, 3, 4, 5)), r"\(B, n, d\)"),
        ([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0]]], "mismatched shapes"),
        (np.ones((2, 3, 4), dtype=complex), "real"),
        (np.ones((2, 3, 0)), "dimension d"),
    ],
)
def test_bad_input_is_a_clear_user_error(bad: object, match: str) -> None:
    for fn in (divergence_radius, cosine_robustness, euclidean_robustness, stability_metrics):
        with pytest.raises(UserInputError, match=match):
            fn(bad)


def test_error_names_the_offending_set() -> None:
    X = np.ones((4, 3, 5))
    X[2, 1] = 0.0
    with pytest.raises(ValueError, match="embedding 1 of set 2"):
        divergence_radius(X)
    with pytest.raises(UserInputError, match="NaN"):
        divergence_radius(torch.full((2, 2, 3), float("nan")))


def test_clean_with_mismatched_shapes() -> None:
    with pytest.raises(UserInputError, match="same B and d"):
        stability_metrics(np.ones((4, 3, 8)), clean=np.ones((4, 7)))
    with pytest.raises(UserInputError, match="same B and d"):
        stability_metrics(np.ones((4, 3, 8)), clean=np.ones((5, 8)))
    with pytest.raises(UserInputError, match=r"clean: expected shape \(B, d\)"):
        stability_metrics(np.ones((4, 3, 8)), clean=np.ones((4, 1, 8)))
