"""Image-text retrieval: Recall@k in both directions as CLIP_benchmark's ``zeroshot_retrieval`` computes it.

The protocol (clip_benchmark 1.6.2, ``metrics/zeroshot_retrieval.py``): L2-normalised image and caption
embeddings, score = caption · image; an image has one or more captions.

- ``image_retrieval_recall@k``: each *caption* queries the images; a hit when its image is among the top k.
- ``text_retrieval_recall@k``: each *image* queries the captions; a hit when any of its captions is among
  the top k (CLIP papers' recall, "some correct item in the top k", not the share of its captions found).

Each query's rank of its first correct item is computed once, and every Recall@k is the share of ranks
below k, so R@1/5/10 and the label-free top-1 change reuse one pass over the scores, in row chunks (a
10,000-query report never holds more than ``CHUNK`` rows of scores). Ties are broken towards the lower
item index (a stable sort of the scores), so duplicate captions rank deterministically. A k larger than
the gallery counts every query as a hit (CLIP_benchmark's ``topk`` would fail there).

Under a corruption the images are corrupted and the captions stay clean. The *top-1 change rate* is the
share of queries (captions querying images and images querying captions) whose top-1 item differs from
the same model's top-1 on the clean images; it needs no pairing of images and captions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RECALL_KS: tuple[int, ...] = (1, 5, 10)
CHUNK = 1024


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norm, np.finfo(np.float32).tiny)


def first_correct_ranks(queries: np.ndarray, items: np.ndarray, correct: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per query: the 0-based rank of its best-placed correct item, and its top-1 item.

    ``queries`` (Q, D) and ``items`` (N, D) are unit rows; ``correct[q]`` holds the indices of query q's correct
    items. The rank counts the items scored above the correct one, plus those scored equal with a lower index.
    """
    q_total, n = len(queries), len(items)
    ranks = np.empty(q_total, dtype=np.int64)
    top1 = np.empty(q_total, dtype=np.int64)
    cols = np.arange(n)
    for start in range(0, q_total, CHUNK):
        s = queries[start : start + CHUNK] @ items.T  # (b, N) float32
        b = len(s)
        top1[start : start + b] = s.argmax(axis=1)  # argmax's first index is the stable order's first
        rows = np.repeat(np.arange(b), [len(correct[start + r]) for r in range(b)])
        idx = np.concatenate([np.asarray(correct[start + r], dtype=np.int64) for r in range(b)]) if b else cols[:0]
        vals = s[rows, idx]
        best = np.full(b, -np.inf, dtype=np.float32)
        np.maximum.at(best, rows, vals)  # the best correct item's score
        at_best = vals == best[rows]
        first = np.full(b, n, dtype=np.int64)
        np.minimum.at(first, rows[at_best], idx[at_best])  # the lowest index among correct items with that score
        above = (s > best[:, None]).sum(axis=1)
        tied_before = ((s == best[:, None]) & (cols[None, :] < first[:, None])).sum(axis=1)
        ranks[start : start + b] = above + tied_before
    return ranks, top1


@dataclass(frozen=True)
class RetrievalScores:
    """One model's retrieval outcome on one cell: per-query first-correct ranks and top-1 items."""

    caption_ranks: np.ndarray  # per caption: rank of its image among the images (image retrieval)
    image_ranks: np.ndarray  # per image: rank of its first caption among the captions (text retrieval)
    caption_top1: np.ndarray  # per caption: the image it retrieves first
    image_top1: np.ndarray  # per image: the caption it retrieves first
    caption_image: np.ndarray  # per caption: its image (the cluster of a caption query)

    def recalls(self, ks: Sequence[int] = RECALL_KS) -> dict[str, float]:
        """CLIP_benchmark's metric names and values."""
        out: dict[str, float] = {}
        for k in ks:
            out[f"image_retrieval_recall@{k}"] = float((self.caption_ranks < k).mean())
            out[f"text_retrieval_recall@{k}"] = float((self.image_ranks < k).mean())
        return out

    def hits(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(per caption, per image) hit bits at k: the per-query outcomes intervals and paired tests read."""
        return self.caption_ranks < k, self.image_ranks < k

    def top1_changes(self, clean: RetrievalScores) -> tuple[np.ndarray, np.ndarray]:
        """(per caption, per image) whether the top-1 item differs from the clean cell's."""
        return self.caption_top1 != clean.caption_top1, self.image_top1 != clean.image_top1

    def top1_change_rate(self, clean: RetrievalScores) -> float:
        captions, images = self.top1_changes(clean)
        return float(np.concatenate([captions, images]).mean())


def score_retrieval(image_embeddings: np.ndarray, caption_embeddings: np.ndarray,
                    caption_image: np.ndarray) -> RetrievalScores:
    """Ranks and top-1 items of every caption query (over images) and image query (over captions)."""
    images, captions = _unit(image_embeddings), _unit(caption_embeddings)
    caption_image = np.asarray(caption_image, dtype=np.int64)
    if caption_image.shape != (len(captions),):
        raise ValueError(f"need one image index per caption ({len(captions)}), got shape {caption_image.shape}")
    if len(captions) and (caption_image.min() < 0 or caption_image.max() >= len(images)):
        raise ValueError("a caption's image index is outside the images")
    of_image = [np.flatnonzero(caption_image == i) for i in range(len(images))]
    if any(c.size == 0 for c in of_image):
        raise ValueError("every image needs at least one caption")
    caption_ranks, caption_top1 = first_correct_ranks(captions, images, [caption_image[t : t + 1]
                                                                         for t in range(len(captions))])
    image_ranks, image_top1 = first_correct_ranks(images, captions, of_image)
    return RetrievalScores(caption_ranks, image_ranks, caption_top1, image_top1, caption_image)


__all__ = ["RECALL_KS", "RetrievalScores", "first_correct_ranks", "score_retrieval"]
