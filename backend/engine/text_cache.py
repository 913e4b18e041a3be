"""Zero-shot classifiers built once: class-prompt embeddings cached in the store.

At 1,000 classes × 80 templates a classifier is 80,000 text forward passes; a rerun, a resume,
a queued run's worker or an FMR run of the same model and label set reads it back instead.
The cache key is the SHA-256 of the model's name, the class names, the templates and the
model's embedding of one probe prompt: other weights behind the same name (a retrained
``local:`` checkpoint), or another device's arithmetic, give another key, so a stale entry is
never used. Rows are float32, stored bit for bit (``domainbench.records.packed``), one packed array a
class, so a large classifier splits into MongoDB parts like any long list.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timezone

import numpy as np
import torch

from domainbench.models import VisionLanguageModel, build_classifier
from domainbench.models.base import DEFAULT_TEMPLATES
from domainbench.records.label_sets import resolve_templates
from domainbench.records.packed import PackedArray
from domainbench.store import Store
from domainbench.store.records import TextEmbeddingRecord

PROBE = "a photo of a domainbench cache probe."


def classifier_key(model: VisionLanguageModel, classes: Sequence[str], templates: Sequence[str]) -> str:
    with torch.inference_mode():
        probe = model.encode_text([PROBE]).float().cpu().numpy()
    blob = json.dumps([model.name, list(classes), list(templates)], ensure_ascii=False).encode()
    return hashlib.sha256(blob + probe.tobytes()).hexdigest()


def cached_classifier(store: Store | None, model: VisionLanguageModel, classes: Sequence[str],
                      templates: Sequence[str] | None) -> torch.Tensor:
    """The (C, D) classifier of ``build_classifier``, from the store's cache when it holds it."""
    prompts = resolve_templates(templates) or list(DEFAULT_TEMPLATES)
    if store is None:
        return build_classifier(model, classes, prompts)
    key = classifier_key(model, classes, prompts)
    hit = store.caches.text_embedding(key)
    if hit is not None:
        rows = np.stack([np.asarray(r, dtype=np.float32) for r in hit.rows])
        return torch.from_numpy(rows).to(model.device)
    clf = build_classifier(model, classes, prompts)
    store.caches.put_text_embedding(TextEmbeddingRecord(
        cache_key=key, model=model.name, n_classes=len(classes), n_templates=len(prompts),
        rows=[PackedArray(r) for r in clf.float().cpu().numpy()],
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    return clf
