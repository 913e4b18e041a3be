"""The gradient search's perturbation family: levels as the greedy search's, steps of one length."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from domainbench.errors import UserInputError
from domainbench.fmr.differentiable import Param, apply, candidate_steps, gradient_search, operations_of, params_for
from domainbench.fmr.generator import SearchConfig, level_params

from .conftest import Zoo


@pytest.mark.parametrize("level", [0.2, 0.6, 1.0])
def test_levels_are_the_greedy_searchs_levels(level: float) -> None:
    p = {q.name: q for q in params_for(3)}
    at = lambda name: float(p[name].value(torch.tensor(level)))  # noqa: E731
    assert at("noise") == pytest.approx(level_params("gaussian_noise", level)["sigma"], rel=1e-6)
    assert at("brightness") == pytest.approx(level_params("brightness", level)["delta"], rel=1e-6)
    assert 1 - at("contrast") == pytest.approx(level_params("contrast", level)["factor"], rel=1e-6)
    assert at("colour_r") == pytest.approx(level_params("color_shift", level)["magnitude"], rel=1e-6)
    # level 0 is the identity, and signed levels mirror
    assert float(p["noise"].value(torch.tensor(0.0))) == 0.0
    assert float(p["brightness"].value(torch.tensor(-level))) == pytest.approx(-at("brightness"))


def test_level_zero_is_the_identity_image() -> None:
    x = torch.rand((2, 16, 16, 3))
    params = params_for(3)
    out = apply(x, torch.zeros((2, len(params))), torch.randn_like(x), params)
    torch.testing.assert_close(out, x)


def test_the_family_is_the_domains_differentiable_counterparts() -> None:
    assert operations_of(["gaussian_noise", "jpeg_compression"]) == ("noise",)
    assert operations_of(["defocus_blur", "low_light", "saturate"]) == ("brightness", "blur", "colour")
    assert [q.name for q in params_for(1, ("brightness", "colour"))] == ["brightness"]  # no colour on grey images


def test_a_domain_without_differentiable_corruptions_is_refused(zoo: Zoo) -> None:
    b = zoo.batch
    with pytest.raises(UserInputError, match="differentiable counterpart.*--search greedy"):
        gradient_search(b.images[:4], b.labels[:4], b.indices[:4], zoo.plain, zoo.oracle, zoo.oracle.votes(b.images[:4]),
                        SearchConfig(seed=0, budget=2), ["jpeg_compression", "pixelate"])


def test_candidate_steps_have_the_greedy_step_length_and_the_steepest_gains_most() -> None:
    rng = np.random.default_rng(0)
    theta = torch.tensor(rng.uniform(0.3, 0.7, (50, 4)), dtype=torch.float32)  # a step of 0.2 stays inside
    grad = torch.tensor(rng.normal(size=(50, 4)), dtype=torch.float32)
    lo, hi = torch.tensor([-1.0, 0, 0, 0]), torch.ones(4)
    cands = candidate_steps(theta, grad, lo, hi, 0.2, 4)
    assert cands.shape == (50, 4, 4)
    moves = cands - theta[:, None]
    np.testing.assert_allclose(moves.norm(dim=2).numpy(), 0.2, rtol=1e-5)  # nothing at a bound here
    # the first three are single-level moves, down the ranking of |gradient|, in the gradient's sign
    order = torch.argsort(-grad.abs(), dim=1)
    for c in range(3):
        moved = (moves[:, c] != 0).float()
        assert (moved.sum(dim=1) == 1).all() and (moved.argmax(dim=1) == order[:, c]).all()
        assert (torch.sign(moves[:, c].sum(dim=1)) == torch.sign(grad.gather(1, order[:, c : c + 1])[:, 0])).all()
    # first-order gain g . step: the whole-gradient step beats every single-level one (Cauchy-Schwarz)
    gain = (moves * grad[:, None]).sum(dim=2)
    assert (gain[:, 3] >= gain[:, :3].max(dim=1).values - 1e-6).all()


def test_a_level_at_its_bound_takes_no_share_of_the_step() -> None:
    theta = torch.tensor([[1.0, 0.5]])
    cands = candidate_steps(theta, torch.tensor([[5.0, 1.0]]), torch.zeros(2), torch.ones(2), 0.2, 3)
    assert (cands[0, :, 0] == 1.0).all()  # pushed past its bound by the gradient: it stays
    torch.testing.assert_close(cands[0, -1], torch.tensor([1.0, 0.7]))


def test_param_bounds() -> None:
    assert Param("b", 0.05, 0.6, signed=True).bounds == (-1.0, 1.0)
    assert Param("n", 0.02, 0.45).bounds == (0.0, 1.0)
