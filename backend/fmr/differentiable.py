"""Differentiable corruptions as torch operations, and the gradient-guided FMR search.

The perturbation of an image is a parameter vector θ (one per image): brightness shift,
contrast reduction, blur amount, noise amplitude and (RGB images) per-channel colour gains.
θ = 0 is the identity. Each step moves θ by ``step_size`` × (parameter range) in the
direction of the sign of ∂loss/∂θ (a projected signed-gradient step, as in PGD, but in the
small space of physical corruption parameters rather than in pixel space), quantises the
image to uint8 (what is scored and stored is a real image) and asks the oracle; as in
Algorithm 1 the first rejection ends the search and the last accepted image is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from backend.engine.jobs import image_seeds
from backend.fmr.generator import SearchConfig, SearchResult, cross_entropy
from backend.fmr.oracle import Oracle
from backend.fmr.tested import TestedModel


@dataclass(frozen=True)
class Param:
    name: str
    lo: float
    hi: float


#: brightness shift, contrast reduction, blend towards a Gaussian blur (σ = BLUR_SIGMA px),
#: Gaussian noise σ, and per-channel gains (colour; RGB images only)
PARAMS: tuple[Param, ...] = (
    Param("brightness", -0.4, 0.4),
    Param("contrast", 0.0, 0.8),
    Param("blur", 0.0, 1.0),
    Param("noise", 0.0, 0.25),
)
COLOUR = (Param("gain_r", -0.3, 0.3), Param("gain_g", -0.3, 0.3), Param("gain_b", -0.3, 0.3))
BLUR_SIGMA = 1.5


def params_for(channels: int) -> tuple[Param, ...]:
    return PARAMS + (COLOUR if channels == 3 else ())


def _gauss_kernel(sigma: float, dtype: torch.dtype) -> torch.Tensor:
    r = int(np.ceil(3 * sigma))
    x = torch.arange(-r, r + 1, dtype=dtype)
    k = torch.exp(-(x**2) / (2 * sigma**2))
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, sigma: float = BLUR_SIGMA) -> torch.Tensor:
    """Separable Gaussian blur of (N, C, H, W), reflect-padded."""
    k = _gauss_kernel(sigma, x.dtype).to(x.device)
    c, r = x.shape[1], (len(k) - 1) // 2
    pad = min(r, x.shape[-1] - 1, x.shape[-2] - 1)
    if pad < r:
        k = k[r - pad : r + pad + 1] / k[r - pad : r + pad + 1].sum()
    x = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def apply(x: torch.Tensor, theta: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Perturb float images (N, H, W, C) in [0, 1] with θ (N, P); differentiable in x and θ."""
    b, c, blur, sigma = theta[:, 0], theta[:, 1], theta[:, 2], theta[:, 3]
    v = lambda t: t.view(-1, 1, 1, 1)  # noqa: E731 - broadcast per image
    if theta.shape[1] > len(PARAMS):
        x = x * (1 + theta[:, None, None, len(PARAMS) :])  # colour: per-channel gain
    x = x + v(b)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = mean + (x - mean) * (1 - v(c))
    xc = x.permute(0, 3, 1, 2)
    xc = xc + (gaussian_blur(xc) - xc) * blur.view(-1, 1, 1, 1)
    x = xc.permute(0, 2, 3, 1) + v(sigma) * noise
    return x.clamp(0.0, 1.0)


def _noise(indices: np.ndarray, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    seeds = image_seeds(seed, "fmr:gradient-noise", 0, indices)
    return torch.stack([torch.randn(shape, generator=torch.Generator().manual_seed(s)) for s in seeds]) if len(seeds) else torch.zeros((0, *shape))


def to_uint8(x: torch.Tensor) -> np.ndarray:
    return (x.detach() * 255.0).round().clamp(0, 255).to(torch.uint8).numpy()


def gradient_search(images: np.ndarray, labels: np.ndarray, indices: np.ndarray, tested: TestedModel, oracle: Oracle,
                    clean_votes: np.ndarray, cfg: SearchConfig) -> SearchResult:
    """The gradient-guided variant of Algorithm 1 for one batch of labelled images."""
    n = len(images)
    labels = np.asarray(labels, dtype=np.int64)
    validated = oracle.agrees(clean_votes, labels)
    result = SearchResult(images=images.copy(), steps=np.zeros(n, dtype=np.int64), validated=validated,
                          oracle_clean=clean_votes, oracle_final=clean_votes.copy(), ops=[[] for _ in range(n)])
    if cfg.budget == 0 or n == 0:
        return result
    grad_fn = tested.torch_logits
    if grad_fn is None:
        from backend.errors import UserInputError

        raise UserInputError(f"tested model {tested.name!r} has no differentiable path; use the greedy search (--search greedy)")
    squeeze = images.ndim == 3
    x0 = torch.from_numpy(np.ascontiguousarray(images[..., None] if squeeze else images)).float() / 255.0
    params = params_for(x0.shape[-1])
    lo = torch.tensor([p.lo for p in params], dtype=torch.float32)
    hi = torch.tensor([p.hi for p in params], dtype=torch.float32)
    width = hi - lo
    theta = torch.zeros((n, len(params)))
    noise = _noise(indices, tuple(x0.shape[1:]), cfg.seed)
    active = validated.copy()
    y = torch.as_tensor(labels)
    for _ in range(cfg.budget):
        pos = np.flatnonzero(active)
        if len(pos) == 0:
            break
        th = theta[pos].clone().requires_grad_(True)
        loss = F.cross_entropy(grad_fn(apply(x0[pos], th, noise[pos])), y[pos], reduction="sum")
        (grad,) = torch.autograd.grad(loss, th)
        # the sign is taken after rounding, for the same reason losses are rounded: a batch of
        # another size must not flip a step's direction through the last float bits
        step = torch.sign(torch.round(grad.double(), decimals=6)).float()
        new = torch.maximum(torch.minimum(theta[pos] + cfg.step_size * width * step, hi), lo)
        # no parameter can move (zero gradient, or every one at its bound): the search is over
        stuck = (new == theta[pos]).all(dim=1).numpy()
        active[pos[stuck]] = False
        pos, new = pos[~stuck], new[~stuck]
        if len(pos) == 0:
            break
        with torch.no_grad():
            imgs = to_uint8(apply(x0[pos], new, noise[pos]))
        if squeeze:
            imgs = imgs[..., 0]
        votes = oracle.votes(imgs)
        ok = oracle.agrees(votes, labels[pos])
        for k, p in enumerate(pos):
            if ok[k]:
                theta[p] = new[k]
                result.images[p] = imgs[k]
                result.oracle_final[p] = votes[k]
                result.steps[p] += 1
                result.ops[p] = [(prm.name, round(float(v), 6)) for prm, v in zip(params, new[k]) if float(v) != 0.0]
            else:
                active[p] = False
    return result


def cross_entropy_of(tested: TestedModel, images: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return cross_entropy(tested.logits(images), labels)
