"""Embedding stability: how far an image's embedding moves under a corruption's parameter grid."""

from __future__ import annotations

from domainbench.metrics.registry import Metric

_NEEDS = ("stability: embeddings of the clean image and its perturbed versions",)
_MEAN = "per image over the corruption's parameter grid, then the mean over the model × corruption's images"

METRICS = (
    Metric("divergence_radius", "DivergenceRadius R_dr", "distance", "lower",
           "radius of the smallest ball holding an image's L2-normalised embeddings, clean and perturbed (equally "
           "spaced parameters of each corruption): larger = the embedding moves more", "image",
           _NEEDS, _MEAN, interval="bootstrap", order=10, field="divergence_radius"),
    Metric("cosine", "cosine radius R_cs", "cosine", "lower",
           "(1 − the smallest cosine between an image's embeddings, clean and perturbed) / 2", "image", _NEEDS, _MEAN,
           interval="bootstrap", order=20, field="cosine"),
    Metric("euclidean", "Euclidean radius R_ed", "distance", "lower",
           "half the largest distance between an image's L2-normalised embeddings (√R_cs)", "image", _NEEDS, _MEAN,
           interval="bootstrap", order=30, field="euclidean"),
)
