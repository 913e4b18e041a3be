"""A fast, deterministic stand-in model for engine tests (no MiniLM, no downloads).

Image embedding: a fixed random projection of the 8×8 area-downscaled grey image; text
embedding: a hash-seeded random vector per string. Registered as ``fake:NAME``; the name
``fake:nan`` returns NaN embeddings to test the engine's guard.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence

import numpy as np
import torch

from domainbench.models import register_model
from domainbench.models.base import VisionLanguageModel

DIM = 16


class FakeModel(VisionLanguageModel):
    oom_raised = 0
    def __init__(self, name: str, device: torch.device) -> None:
        self.name = f"fake:{name}"
        self.device = device
        # behaviour variants share fake:a's weights, so their numbers can be compared with it
        seed = zlib.crc32((name if name not in ("slow", "nan", "oom") else "a").encode())
        self.proj = torch.from_numpy(np.random.default_rng(seed).normal(size=(64, DIM)).astype(np.float32))
        self.nan = name == "nan"
        self.delay = 0.1 if name == "slow" else 0.0
        # "oom" fails like a GPU running out of memory on batches larger than 8
        self.oom_above = 8 if name == "oom" else 0

    def preprocess(self, images: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(np.asarray(images, dtype=np.float32))
        if x.ndim == 4:
            x = x.mean(dim=-1)
        return torch.nn.functional.adaptive_avg_pool2d(x[:, None], 8) / 255.0

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        time.sleep(self.delay)  # "slow" makes a run long enough to be killed part-way
        if self.oom_above and len(pixels) > self.oom_above:
            FakeModel.oom_raised += 1
            raise torch.OutOfMemoryError(f"fake OOM for a batch of {len(pixels)}")
        emb = pixels.reshape(len(pixels), -1) @ self.proj
        if self.nan:
            emb = emb * float("nan")
        return torch.nn.functional.normalize(emb, dim=-1)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        vecs = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=DIM) for t in texts]
        return torch.nn.functional.normalize(torch.tensor(np.array(vecs), dtype=torch.float32), dim=-1)


@register_model("fake", known=["a", "b", "c", "slow", "nan", "oom"])
def create_fake(name: str, device: torch.device) -> VisionLanguageModel:
    return FakeModel(name, device)
