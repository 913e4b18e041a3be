"""Differentiable corruptions as torch operations, and the gradient-guided FMR search.

The perturbation of an image is a vector θ of levels (one per image) of the differentiable
counterparts of the domain's corruptions: brightness shift, contrast reduction, blur, noise
amplitude and (RGB images) per-channel colour offsets, each level spanning its catalogue
corruption's range exactly as the greedy search's levels do. θ = 0 is the identity. Each step
takes the gradient of the objective (``Objective``: the tested model's loss minus the other
oracle members') with respect to θ, proposes ``candidates`` moves of length ``step_size``
along it (``candidate_steps``), quantises each candidate image to uint8 (what is scored and
stored is a real image), keeps the best-scoring one and asks the oracle; as in Algorithm 1 the
first rejection ends the search and the last accepted image is kept. Same budget, candidates
and step length as the greedy search, so the two compare step for step
(``benchmarks/fmr.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from domainbench import corruptions
from domainbench.corruptions.spec import REFERENCE_SIZE
from domainbench.engine.jobs import image_seeds
from domainbench.fmr.generator import SearchConfig, SearchResult, cross_entropy
from domainbench.fmr.oracle import Oracle
from domainbench.errors import UserInputError
from domainbench.fmr.tested import TestedModel, ZeroShotTested


@dataclass(frozen=True)
class Param:
    """One entry of θ: a level in [0, 1] ([-1, 1] when ``signed``) as the greedy search's levels.

    Level 0 is the identity; level ℓ ≠ 0 is the value ``sign(ℓ) × (weakest + |ℓ| × (strongest -
    weakest))`` of the catalogue corruption's range, the greedy search's ``level_params`` (its
    first step jumps from nothing to the weakest value plus a step, and so does this one).
    """

    name: str
    weakest: float
    strongest: float
    signed: bool = False

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1.0 if self.signed else 0.0, 1.0)

    def value(self, level: torch.Tensor) -> torch.Tensor:
        # differentiable everywhere in ℓ with slope (strongest - weakest); sign(0) = 0 keeps 0 the identity
        return torch.sign(level).detach() * self.weakest + level * (self.strongest - self.weakest)


#: differentiable operation -> the catalogue corruptions it stands for; a domain's gradient
#: family is the operations any of its corruptions maps to
COUNTERPARTS: dict[str, tuple[str, ...]] = {
    "brightness": ("brightness", "low_light"),
    "contrast": ("contrast",),
    "blur": ("gaussian_blur", "defocus_blur", "motion_blur", "zoom_blur", "glass_blur"),
    "noise": ("gaussian_noise", "shot_noise", "speckle_noise", "iso_noise"),
    "colour": ("color_shift", "saturate"),
}
OPERATIONS = tuple(COUNTERPARTS)


def _range(name: str, key: str, transform: Callable[[float], float] = float) -> tuple[float, float]:
    """(weakest, strongest) of a catalogue corruption's continuous range, after ``transform``."""
    a, b = (transform(v) for v in corruptions.get(name).ranges[key])
    return (a, b) if abs(a) <= abs(b) else (b, a)


def params_for(channels: int, operations: Sequence[str] = OPERATIONS) -> tuple[Param, ...]:
    """The entries of θ for the operations, each spanning the range of the catalogue corruption it
    stands for: brightness's delta (either sign), contrast's factor as a reduction 1 - factor,
    a blend towards gaussian_blur's strongest blur (``blur_sigma``), gaussian_noise's σ, and
    per-channel offsets of color_shift's magnitude (either sign; RGB images only)."""
    out: list[Param] = []
    if "brightness" in operations:
        out.append(Param("brightness", *_range("brightness", "delta"), signed=True))
    if "contrast" in operations:
        out.append(Param("contrast", *_range("contrast", "factor", lambda f: 1.0 - f)))
    if "blur" in operations:
        out.append(Param("blur", 0.0, 1.0))
    if "noise" in operations:
        out.append(Param("noise", *_range("gaussian_noise", "sigma")))
    if "colour" in operations and channels == 3:
        out += [Param(f"colour_{c}", *_range("color_shift", "magnitude"), signed=True) for c in "rgb"]
    return tuple(out)


def operations_of(family: Sequence[str] | None) -> tuple[str, ...]:
    """The differentiable operations a domain's corruption family maps to (all of them for None)."""
    if family is None:
        return OPERATIONS
    names = {corruptions.get(c).name for c in family}
    return tuple(op for op, cats in COUNTERPARTS.items() if names & set(cats))


def blur_sigma(height: int, width: int) -> float:
    """gaussian_blur's strongest σ, scaled like the catalogue's from 224 pixels to this image."""
    return max(0.5, _range("gaussian_blur", "sigma")[1] * min(height, width) / REFERENCE_SIZE)


def _gauss_kernel(sigma: float, dtype: torch.dtype) -> torch.Tensor:
    r = int(np.ceil(3 * sigma))
    x = torch.arange(-r, r + 1, dtype=dtype)
    k = torch.exp(-(x**2) / (2 * sigma**2))
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of (N, C, H, W), reflect-padded."""
    k = _gauss_kernel(sigma, x.dtype).to(x.device)
    c, r = x.shape[1], (len(k) - 1) // 2
    pad = min(r, x.shape[-1] - 1, x.shape[-2] - 1)
    if pad < r:
        k = k[r - pad : r + pad + 1] / k[r - pad : r + pad + 1].sum()
    x = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def apply(x: torch.Tensor, theta: torch.Tensor, noise: torch.Tensor, params: Sequence[Param]) -> torch.Tensor:
    """Perturb float images (N, H, W, C) in [0, 1] with θ (N, len(params)); differentiable in x and θ.

    Order: colour, brightness, contrast, blur, noise (the order a camera pipeline meets them).
    """
    col = {p.name: p.value(theta[:, j]) for j, p in enumerate(params)}
    v = lambda t: t.view(-1, 1, 1, 1)  # noqa: E731 - broadcast per image
    if "colour_r" in col:
        x = x + torch.stack([col["colour_r"], col["colour_g"], col["colour_b"]], dim=1)[:, None, None, :]
    if "brightness" in col:
        x = x + v(col["brightness"])
    if "contrast" in col:
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = mean + (x - mean) * (1 - v(col["contrast"]))
    if "blur" in col:
        xc = x.permute(0, 3, 1, 2)
        xc = xc + (gaussian_blur(xc, blur_sigma(*x.shape[1:3])) - xc) * v(col["blur"])
        x = xc.permute(0, 2, 3, 1)
    if "noise" in col:
        x = x + v(col["noise"]) * noise
    return x.clamp(0.0, 1.0)


def _noise(indices: np.ndarray, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    seeds = image_seeds(seed, "fmr:gradient-noise", 0, indices)
    return torch.stack([torch.randn(shape, generator=torch.Generator().manual_seed(s)) for s in seeds]) if len(seeds) else torch.zeros((0, *shape))


def to_uint8(x: torch.Tensor) -> np.ndarray:
    return (x.detach() * 255.0).round().clamp(0, 255).to(torch.uint8).numpy()


def gradient_search(images: np.ndarray, labels: np.ndarray, indices: np.ndarray, tested: TestedModel, oracle: Oracle,
                    clean_votes: np.ndarray, cfg: SearchConfig, family: Sequence[str] | None = None) -> SearchResult:
    """The gradient-guided variant of Algorithm 1 for one batch of labelled images.

    ``family`` is the domain's corruption catalogue: the search perturbs with the differentiable
    counterparts of its corruptions (``operations_of``); None: every differentiable operation.
    """
    n = len(images)
    labels = np.asarray(labels, dtype=np.int64)
    validated = oracle.agrees(clean_votes, labels)
    result = SearchResult(images=images.copy(), steps=np.zeros(n, dtype=np.int64), validated=validated,
                          oracle_clean=clean_votes, oracle_final=clean_votes.copy(), ops=[[] for _ in range(n)])
    if cfg.budget == 0 or n == 0:
        return result
    if tested.torch_logits is None:
        raise UserInputError(f"tested model {tested.name!r} has no differentiable path; use the greedy search (--search greedy)")
    squeeze = images.ndim == 3
    x0 = torch.from_numpy(np.ascontiguousarray(images[..., None] if squeeze else images)).float() / 255.0
    params = params_for(x0.shape[-1], operations_of(family))
    if not params:
        raise UserInputError(f"none of the domain's corruptions ({', '.join(family or [])}) has a differentiable counterpart "
                             f"({', '.join(n for cats in COUNTERPARTS.values() for n in cats)}); use the greedy search (--search greedy)")
    objective = Objective(tested, [ZeroShotTested(m) for m in oracle.members if m.name != tested.name])
    lo = torch.tensor([p.bounds[0] for p in params], dtype=torch.float32)
    hi = torch.tensor([p.bounds[1] for p in params], dtype=torch.float32)
    theta = torch.zeros((n, len(params)))
    noise = _noise(indices, tuple(x0.shape[1:]), cfg.seed)
    active = validated.copy()
    for _ in range(cfg.budget):
        pos = np.flatnonzero(active)
        if len(pos) == 0:
            break
        th = theta[pos].clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(objective.differentiable(apply(x0[pos], th, noise[pos], params), labels[pos]), th)
        cands = candidate_steps(theta[pos], grad, lo, hi, cfg.step_size, cfg.candidates)
        # no candidate moves a level (zero gradient, or every one at its bound): the search is over
        moved = (cands != theta[pos][:, None]).any(dim=2)
        stuck = ~moved.any(dim=1).numpy()
        active[pos[stuck]] = False
        pos, cands, moved = pos[~stuck], cands[~stuck], moved[~stuck]
        if len(pos) == 0:
            break
        k = cands.shape[1]
        rep = np.repeat(pos, k)
        with torch.no_grad():
            imgs_all = to_uint8(apply(x0[rep], cands.reshape(-1, cands.shape[2]), noise[rep], params))
        imgs_all = imgs_all[..., 0] if squeeze else imgs_all
        # scored on the quantised images, as the greedy search scores its candidates
        score = objective.scores(imgs_all, labels[rep]).reshape(len(pos), k)
        score[~moved.numpy()] = -np.inf
        pick = score.argmax(axis=1)  # first candidate wins a tie: deterministic
        rows = np.arange(len(pos))
        new = cands[rows, pick]
        imgs = imgs_all.reshape(len(pos), k, *imgs_all.shape[1:])[rows, pick]
        votes = oracle.votes(imgs)
        ok = oracle.agrees(votes, labels[pos])
        for j, p in enumerate(pos):
            if ok[j]:
                theta[p] = new[j]
                result.images[p] = imgs[j]
                result.oracle_final[p] = votes[j]
                result.steps[p] += 1
                result.ops[p] = [(prm.name, round(float(v), 6)) for prm, v in zip(params, new[j]) if float(v) != 0.0]
            else:
                active[p] = False  # Algorithm 1: the first rejection ends this image's search
    return result


@dataclass
class Objective:
    """What a step ascends: the tested model's cross-entropy minus the other oracle members'.

    The greedy search maximises the tested loss alone and learns of the oracle only when a step
    is rejected, which ends the image's search. Subtracting the members' losses steers the
    search towards perturbations that fool the tested model while the oracle keeps the label:
    where the tested model is itself a member, its flip can only pass if the others hold.
    Members without a differentiable path still count when candidates are scored.
    """

    tested: TestedModel
    members: list[ZeroShotTested]

    def differentiable(self, x: torch.Tensor, labels: np.ndarray) -> torch.Tensor:
        y = torch.as_tensor(labels)
        loss = F.cross_entropy(self.tested.torch_logits(x), y, reduction="sum")  # type: ignore[misc]
        for m in self.members:
            fn = m.torch_logits
            if fn is not None:
                loss = loss - F.cross_entropy(fn(x), y, reduction="sum")
        return loss

    def scores(self, images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        score = cross_entropy(self.tested.logits(images), labels)
        for m in self.members:
            score = score - cross_entropy(m.logits(images), labels)
        return score


def candidate_steps(theta: torch.Tensor, grad: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, step_size: float,
                    candidates: int) -> torch.Tensor:
    """(N, K, P) candidate levels one step from θ (N, P), ranked by the gradient.

    Every candidate moves θ by ``step_size`` in level units, the length of one greedy step (one
    corruption's level raised by ``step_size``). The first K - 1 candidates move the single
    levels with the largest gradients, each in its gradient's sign (the greedy search's moves,
    with the gradient choosing which and in which direction); the last follows the whole
    gradient, the steepest ascent at that length, whose first-order gain is at least any single
    level's (Cauchy-Schwarz).
    """
    # rounded as losses are: a batch of another size must not change a step through the last float bits
    g = torch.round(grad.double(), decimals=6).float()
    # a level at its bound in the gradient's direction cannot move: it takes no share of the step
    blocked = ((g > 0) & (theta >= hi)) | ((g < 0) & (theta <= lo))
    g = g.masked_fill(blocked, 0.0)
    order = torch.argsort(-g.abs(), dim=1, stable=True)
    n, p = theta.shape
    k = max(1, min(candidates, p + 1))
    directions = [torch.zeros((n, p)).scatter_(1, order[:, c : c + 1], 1.0) * g for c in range(min(k - 1, p))] + [g]
    out = []
    for d in directions:
        norm = d.norm(dim=1, keepdim=True)
        unit = torch.where(norm > 0, d / norm.clamp_min(1e-12), torch.zeros(()))
        out.append(torch.maximum(torch.minimum(theta + step_size * unit, hi), lo))
    return torch.stack(out, dim=1)
