"""VQA and retrieval manifests built offline from the bundled Fashion-MNIST sample (demos and tests).

``write_sample_manifests(folder, images=N)`` writes N sample images as PNG files (a seeded sample, every class
in turn) and beside them:

- ``vqa.jsonl``: per image, a yes/no question ("Is this a shoe?", yes for sandals, sneakers and ankle boots),
  an open question ("What kind of garment is this?", the class name as its reference) and a multiple-choice
  variant (the class and two other classes as options, in a seeded order);
- ``retrieval.jsonl``: per image, captions from its class name and ``CAPTION_TEMPLATES``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SHOES = frozenset({"sandal", "sneaker", "ankle boot"})
CAPTION_TEMPLATES = ("a photo of a {}.", "a black and white picture of a {}.")
YES_NO_QUESTION = "Is this a shoe?"
OPEN_QUESTION = "What kind of garment is this?"
CHOICE_QUESTION = "Which of these is it?"


def write_sample_manifests(folder: str | Path, images: int = 20, seed: int = 0) -> tuple[Path, Path]:
    """Write the images and the two manifests under ``folder``; returns (vqa.jsonl, retrieval.jsonl)."""
    from PIL import Image

    from domainbench.data import class_rounds, load_sample

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    ds = load_sample()
    assert ds.labels is not None and ds.arrays is not None
    rng = np.random.default_rng(seed)
    picked = class_rounds(ds.labels, rng)[:images]
    vqa, retrieval = [], []
    for i in picked:
        name = ds.classes[int(ds.labels[i])]
        rel = f"images/{int(i):04d}.png"
        Image.fromarray(ds.arrays[i]).save(folder / rel)
        others = [c for c in ds.classes if c != name]
        options = [name, *rng.choice(others, size=2, replace=False).tolist()]
        rng.shuffle(options)
        vqa += [
            {"image": rel, "question": YES_NO_QUESTION, "answers": ["yes" if name in SHOES else "no"],
             "answer_type": "yes/no"},
            {"image": rel, "question": OPEN_QUESTION, "answers": [name], "answer_type": "other"},
            {"image": rel, "question": CHOICE_QUESTION, "choices": options, "answers": [name]},
        ]
        retrieval.append({"image": rel, "captions": [t.format(name) for t in CAPTION_TEMPLATES]})
    paths = folder / "vqa.jsonl", folder / "retrieval.jsonl"
    for path, rows in zip(paths, (vqa, retrieval)):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


__all__ = ["CAPTION_TEMPLATES", "SHOES", "write_sample_manifests"]
