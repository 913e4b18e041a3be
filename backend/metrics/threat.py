"""Projected Displacement (PD) threat: is a corruption label-preserving ("safe")?

Paper: ``papers/001_f01198babdb07d9d.txt`` (Definitions 6-10, Appendix A.2-A.5).

For an input x of class y and a perturbation δ, with anchors a (representative images of the
*other* classes) the threat is::

    d(x, δ) = max_{a : label(a) != y}  max(<δ, a - x>, 0) / (β · W(y, c_a) · ||a - x||²)

β = 1/2 by default; W = 1 for plain PD, the class weights for PD-W. d grows linearly in δ
(d(x, tδ) = t·d(x, δ), t >= 0) and its sublevel sets are intersections of half-spaces, hence
convex. Moving x exactly onto an anchor of another class (δ = a - x) has threat 1/β = 2.

Variants
- PD-S (Definition 8): a binary foreground mask per image restricts the inner product to
  the masked pixels, <δ[m], (a - x)[m]>; the normalisation keeps the full ||a - x|| (as in
  the paper, g_β does not change). Implemented as δ ⊙ m, which is the same for a 0/1 mask.
- PD-W (Definition 9): ``class_weights[y, c]`` divides the normalisation, so perturbations
  towards nearby classes (small weight) are more threatening. ``class_weights="euclidean"``
  computes the paper's Euclidean relative weights (Definition 10) from the anchors;
  :func:`relative_class_weights` turns any user class-distance matrix (e.g. WordNet path
  lengths, Definition 12) into weights the same way; combining several as in Definition 13
  (min, squared) is ``relative_class_weights(...) `` per source, then ``np.minimum(...)**2``.

Anchors (Appendix A.2): per class, greedy farthest-point k-centre on cosine similarity,
started deterministically at the image closest in direction to the class mean (the paper
starts at random). A class with fewer than k images contributes all of them and warns.

Preprocessing contract
- Images are arrays (N, ...) of any per-image shape; they are flattened to float32 vectors
  *as given*: no resizing, no rescaling. Anchors and inputs must therefore be preprocessed
  identically (same size, same value scale, e.g. both float in [0, 1]). Mismatched
  per-image shapes raise :class:`ThreatInputError`; a value scale that differs by more than
  ``SCALE_MISMATCH_FACTOR`` between inputs and anchors (typically [0, 255] vs [0, 1]) also
  raises (pass ``check_scale=False`` to :meth:`ProjectedDisplacement.threat` to skip).

Numerics
- The batched form uses two matrix products per anchor chunk, <δ, a> - <δ, x> and
  ||a||² - 2<a, x> + ||x||², in float32 (float32 accumulation). Inputs and anchors are first
  centred on the anchors' mean, which leaves every a - x unchanged but shrinks the terms
  that cancel; per-row terms use numpy's pairwise float32 summation. Under
  ``torch.autocast`` the products still run in float32 (autocast is disabled inside).
  Pairs whose expanded squared distance is below ``RECOMPUTE_REL`` of
  ||a||² + ||x||² (near-duplicates, where the expansion loses digits) are recomputed
  directly from a - x.
- Memory is bounded by ``chunk_size`` anchors at a time: a few (B, chunk_size) float32
  matrices plus a centred float32 copy of x and δ.
- An input identical to an anchor of another class (a - x = 0) gives no direction; that
  anchor is *ignored* for that input (it contributes threat 0), in both implementations.
- numpy inputs are computed with numpy; torch inputs with torch on their device (CUDA
  tensors stay on the GPU). With TF32 matmuls enabled globally
  (``torch.backends.cuda.matmul.allow_tf32 = True``) CUDA results lose the float32
  guarantee; keep it off (the PyTorch default).
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Hashable, Mapping
from typing import Any, Literal

import numpy as np

from domainbench.metrics.threat_errors import ThreatInputError
from domainbench.metrics.threat_projection import project_exact, project_radial

#: paper defaults (Section 3.2): k = 50 anchors per class, β = 1/2
DEFAULT_K = 50
DEFAULT_BETA = 0.5

#: expanded squared distances below this fraction of ||a||² + ||x||² (centred) are
#: recomputed from a - x: beyond that the float32 cancellation error exceeds ~1e-5 relative
RECOMPUTE_REL = 0.02

#: inputs whose largest |value| differs from the anchors' by more than this factor were
#: almost surely scaled differently ([0, 255] vs [0, 1])
SCALE_MISMATCH_FACTOR = 20.0

#: smallest PD-W weight: min-max scaling gives the nearest class weight 0, which would make
#: any aligned perturbation infinitely threatening
DEFAULT_MIN_WEIGHT = 0.05

DEFAULT_CHUNK_SIZE = 1024


class AnchorWarning(UserWarning):
    """A class had fewer images than k; all of its images became anchors."""


# --------------------------------------------------------------------------- helpers


def _is_torch(a: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def _as_image_batch(images: Any, name: str) -> np.ndarray:
    """(N, ...) float32 array from an array or a sequence of same-shape images."""
    if images is None:
        raise ThreatInputError(f"{name} is None; pass an array of shape (N, ...) of images")
    if _is_torch(images):
        images = images.detach().cpu().numpy()
    if isinstance(images, (list, tuple)):
        if len(images) == 0:
            raise ThreatInputError(f"{name} is empty; pass at least one image")
        shapes = {np.shape(im) for im in images}
        if len(shapes) > 1:
            raise ThreatInputError(
                f"{name} holds images of mixed sizes {sorted(shapes)[:4]}; resize every image "
                "to one size (the same preprocessing as the anchors) before computing threats"
            )
    try:
        arr = np.asarray(images, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ThreatInputError(f"{name} must be a numeric array of shape (N, ...): {exc}") from exc
    if arr.ndim < 2:
        raise ThreatInputError(
            f"{name} must have shape (N, ...) with a batch axis first, got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ThreatInputError(f"{name} is empty; pass at least one image")
    if not np.all(np.isfinite(arr)):
        raise ThreatInputError(f"{name} contains NaN or infinite values")
    return arr


def _as_labels(labels: Any, n: int, name: str) -> np.ndarray:
    if labels is None:
        raise ThreatInputError(
            f"{name} is None: the PD threat needs class labels (unsafe directions point "
            "towards images of *other* classes); pass labelled images or a labelled anchor set"
        )
    if _is_torch(labels):
        labels = labels.detach().cpu().numpy()
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ThreatInputError(f"{name} must have shape ({n},), one label per image, got {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ThreatInputError(f"{name} contains NaN labels; drop unlabeled images first")
    if arr.dtype == object and any(v is None for v in arr):
        raise ThreatInputError(f"{name} contains None labels; drop unlabeled images first")
    return arr


def _row_dots(xc: np.ndarray, d2: np.ndarray, rows: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """||x||² and <δ, x> per row, float32 with numpy's pairwise summation (einsum sums
    sequentially: ~6× larger error at d = 12288); ``rows`` at a time bounds the temporary."""
    xx = np.empty(xc.shape[0], np.float32)
    dx = np.empty(xc.shape[0], np.float32)
    for s in range(0, xc.shape[0], rows):
        xs = xc[s : s + rows]
        xx[s : s + rows] = (xs * xs).sum(axis=1)
        dx[s : s + rows] = (d2[s : s + rows] * xs).sum(axis=1)
    return xx, dx


# --------------------------------------------------------------------------- anchors


def _greedy_k_centre_cosine(vectors: np.ndarray, k: int) -> np.ndarray:
    """Indices of a greedy (farthest-point) k-centre subset under cosine similarity.

    Start: the vector most similar to the mean direction (deterministic, order-free up to
    ties). Then repeatedly add the vector whose largest cosine to the chosen set is lowest
    (Algorithm 1 of the paper). Zero vectors have cosine 0 to everything.
    """
    n = vectors.shape[0]
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    unit = np.divide(vectors, norms[:, None], out=np.zeros_like(vectors), where=norms[:, None] > 0)
    mean_dir = unit.astype(np.float64).sum(axis=0)
    chosen = [int(np.argmax(unit @ mean_dir.astype(np.float32)))]
    max_sim = unit @ unit[chosen[0]]
    max_sim[chosen[0]] = np.inf
    for _ in range(1, min(k, n)):
        nxt = int(np.argmin(max_sim))
        chosen.append(nxt)
        np.maximum(max_sim, unit @ unit[nxt], out=max_sim)
        max_sim[nxt] = np.inf  # never pick twice, even exact duplicates
    return np.asarray(chosen, dtype=np.int64)


def select_anchor_indices(images: Any, labels: Any, k: int = DEFAULT_K) -> np.ndarray:
    """Indices (into ``images``) of the anchors chosen by :func:`select_anchors`.

    Ordered by class (sorted labels), then by selection order within the class.
    """
    arr = _as_image_batch(images, "images")
    lab = _as_labels(labels, arr.shape[0], "labels")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ThreatInputError(f"k must be a positive integer (anchors per class), got {k!r}")
    flat = arr.reshape(arr.shape[0], -1)
    out: list[np.ndarray] = []
    small: list[str] = []
    for cls in np.unique(lab):
        idx = np.flatnonzero(lab == cls)
        if idx.size < k:
            small.append(f"{cls.item()!r} ({idx.size})")
        out.append(idx[_greedy_k_centre_cosine(flat[idx], int(k))])
    if small:
        warnings.warn(
            f"classes with fewer than k={k} images use all their images as anchors: "
            + ", ".join(small),
            AnchorWarning,
            stacklevel=3,
        )
    return np.concatenate(out)


def select_anchors(images: Any, labels: Any, k: int = DEFAULT_K) -> tuple[np.ndarray, np.ndarray]:
    """Per class, k representative images by greedy k-centre on cosine similarity.

    ``images``: (N, ...) array (or a list of same-shape arrays), in exactly the preprocessing
    the threat inputs will have (same size, same scaling); compared as flattened float32
    vectors. ``labels``: (N,) class labels (ints or strings); ``None`` raises.

    A class with fewer than k images contributes all of its images and an
    :class:`AnchorWarning` names it (a threat can still be computed; it just has fewer
    unsafe directions for that class).

    Returns ``(anchor_images, anchor_labels)``: float32 images of the input's per-image
    shape and their labels, grouped by sorted class.
    """
    arr = _as_image_batch(images, "images")
    lab = _as_labels(labels, arr.shape[0], "labels")
    idx = select_anchor_indices(arr, lab, k)
    return arr[idx], lab[idx]


# --------------------------------------------------------------------------- PD-W weights


def euclidean_class_distances(anchors: Any, anchor_labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """L2(y, c) = mean ||a - b|| over anchors a of class y and b of class c (Definition 10).

    Returns ``(distances (C, C), classes (C,))`` with classes in sorted order. Computed in
    float64 over blocks of 512 anchors (no float64 copy of the whole set).
    """
    arr = _as_image_batch(anchors, "anchors")
    lab = _as_labels(anchor_labels, arr.shape[0], "anchor_labels")
    classes, cls_idx = np.unique(lab, return_inverse=True)
    flat = arr.reshape(arr.shape[0], -1)
    onehot = np.eye(classes.size)[cls_idx]  # (M, C)
    sums = np.zeros((classes.size, classes.size))
    block = 512  # float64 blocks of anchors: no full float64 copy
    for s0 in range(0, len(flat), block):
        b0 = flat[s0 : s0 + block].astype(np.float64)
        sq0 = np.einsum("nd,nd->n", b0, b0)
        for s1 in range(0, len(flat), block):
            b1 = b0 if s1 == s0 else flat[s1 : s1 + block].astype(np.float64)
            sq1 = sq0 if s1 == s0 else np.einsum("nd,nd->n", b1, b1)
            d = np.sqrt(np.maximum(sq0[:, None] - 2.0 * (b0 @ b1.T) + sq1[None, :], 0.0))
            sums += onehot[s0 : s0 + block].T @ d @ onehot[s1 : s1 + block]
    counts = onehot.sum(axis=0)
    dist = sums / np.outer(counts, counts)
    return dist, classes


def relative_class_weights(distances: Any, min_weight: float = DEFAULT_MIN_WEIGHT) -> np.ndarray:
    """Relative weights W(y, c) in [min_weight, 1] from a class-distance matrix.

    Per row y, min-max scaling over the *other* classes c != y (the classes of the unsafe
    directions, Definition 10): W = (D[y, c] - min_c D[y, c]) / (max_c D[y, c] - min_c D[y, c]),
    then clipped below at ``min_weight`` (the nearest class would otherwise get weight 0,
    i.e. infinite threat). A row whose other classes are all equidistant (always so with
    two classes) gets weight 1. The diagonal is set to 1 and never used.
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] < 2:
        raise ThreatInputError(f"class distances must be a square (C, C) matrix with C >= 2, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ThreatInputError("class distances contain NaN or infinite values")
    if not 0.0 < min_weight <= 1.0:
        raise ThreatInputError(f"min_weight must be in (0, 1], got {min_weight}")
    n = d.shape[0]
    off = ~np.eye(n, dtype=bool)
    w = np.ones_like(d)
    for y in range(n):
        row = d[y, off[y]]
        lo, hi = row.min(), row.max()
        if hi - lo > 0:
            w[y, off[y]] = (row - lo) / (hi - lo)
    return np.clip(w, min_weight, 1.0)


# --------------------------------------------------------------------------- the threat


class ProjectedDisplacement:
    """The (k, β)-PD threat of a fixed anchor set; PD-S via ``mask``, PD-W via ``class_weights``.

    ``anchors``: (M, ...) images (see :func:`select_anchors`); ``anchor_labels``: (M,).
    ``class_weights``: None (plain PD), ``"euclidean"`` (paper's Euclidean relative weights
    from the anchors, clipped at ``min_weight``), or a (C, C) array of positive weights with
    rows = input class y and columns = anchor class c, both in the order of
    :attr:`classes` (sorted unique anchor labels).
    ``chunk_size``: anchors per matrix product (memory bound).
    """

    def __init__(
        self,
        anchors: Any,
        anchor_labels: Any,
        beta: float = DEFAULT_BETA,
        class_weights: Any = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        min_weight: float = DEFAULT_MIN_WEIGHT,
    ) -> None:
        arr = _as_image_batch(anchors, "anchors")
        lab = _as_labels(anchor_labels, arr.shape[0], "anchor_labels")
        if not (isinstance(beta, numbers.Real) and math.isfinite(beta) and beta > 0):
            raise ThreatInputError(f"beta must be a positive number (paper: 0.5), got {beta!r}")
        if not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ThreatInputError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        classes, cls_idx = np.unique(lab, return_inverse=True)
        if classes.size < 2:
            raise ThreatInputError(
                f"anchors cover only {classes.size} class(es); the PD threat needs anchors of at "
                "least two classes (unsafe directions point to other classes)"
            )
        self.image_shape: tuple[int, ...] = tuple(arr.shape[1:])
        self.beta = float(beta)
        self.chunk_size = int(chunk_size)
        self.classes: np.ndarray = classes
        self.anchor_labels: np.ndarray = lab
        self.anchor_class: np.ndarray = cls_idx.astype(np.int64)
        self.anchors: np.ndarray = arr
        flat = arr.reshape(arr.shape[0], -1)
        self.dim = flat.shape[1]
        # float64 statistics in blocks of 256 anchors (no float64 copy of the whole set)
        blocks = [slice(s, s + 256) for s in range(0, flat.shape[0], 256)]
        mean64 = sum(flat[b].astype(np.float64).sum(axis=0) for b in blocks) / flat.shape[0]
        self._mean = mean64.astype(np.float32)
        self._centred = np.empty_like(flat)
        self._sqnorm = np.empty(flat.shape[0], np.float32)
        for b in blocks:
            c64 = flat[b].astype(np.float64) - mean64
            self._centred[b] = c64
            self._sqnorm[b] = np.einsum("nd,nd->n", c64, c64)
        self._flat = flat  # uncentred, for exact a - x in the recompute path
        self._absmax = float(np.abs(flat).max())

        n_cls = classes.size
        if class_weights is None:
            weights = np.ones((n_cls, n_cls))
        elif isinstance(class_weights, str):
            if class_weights != "euclidean":
                raise ThreatInputError(
                    f"class_weights={class_weights!r} is unknown; use None, 'euclidean' or a "
                    "(C, C) weight matrix"
                )
            dist, _ = euclidean_class_distances(arr, lab)
            weights = relative_class_weights(dist, min_weight)
        else:
            weights = np.asarray(class_weights, dtype=np.float64)
            if weights.shape != (n_cls, n_cls):
                raise ThreatInputError(
                    f"class_weights must have shape ({n_cls}, {n_cls}) (classes {list(classes)[:6]}...), "
                    f"got {weights.shape}"
                )
            off = ~np.eye(n_cls, dtype=bool)
            if not np.all(np.isfinite(weights[off])) or np.any(weights[off] <= 0):
                raise ThreatInputError(
                    "class_weights must be finite and > 0 off the diagonal (a weight of 0 would "
                    "make the threat infinite); clip small weights, e.g. with relative_class_weights"
                )
        self.class_weights: np.ndarray = weights
        # factor[y, c] = 1 / (β W(y, c)); 0 on the diagonal excludes same-class anchors
        factor = 1.0 / (self.beta * np.where(np.eye(n_cls, dtype=bool), 1.0, weights))
        np.fill_diagonal(factor, 0.0)
        self._factor = factor.astype(np.float32)
        self._torch_cache: dict[Any, tuple[Any, ...]] = {}
        self._flat64: np.ndarray | None = None

    # ------------------------------------------------------------------ validation

    def class_index(self, y: Any, n: int) -> np.ndarray:
        """Positions of labels ``y`` in :attr:`classes`; unknown labels raise."""
        lab = _as_labels(y, n, "y")
        try:
            pos = np.searchsorted(self.classes, lab)
        except TypeError as exc:
            raise ThreatInputError(
                f"y labels {lab[:4].tolist()} are not comparable with the anchor labels "
                f"{self.classes[:4].tolist()}; use the same label type for both"
            ) from exc
        pos = np.clip(pos, 0, self.classes.size - 1)
        bad = self.classes[pos] != lab
        if np.any(bad):
            raise ThreatInputError(
                f"y contains labels without anchors: {sorted(set(lab[bad].tolist()))[:5]}; known "
                f"classes are {self.classes.tolist()[:10]} — select anchors for every class"
            )
        return pos.astype(np.int64)

    def _check_batch(self, x: Any, name: str) -> tuple[int, ...]:
        shape = tuple(x.shape)
        if len(shape) < 2:
            raise ThreatInputError(f"{name} must be a batch (B, ...) , got shape {shape}")
        if shape[1:] != self.image_shape and math.prod(shape[1:]) != self.dim:
            raise ThreatInputError(
                f"{name} has per-image shape {shape[1:]} but the anchors have {self.image_shape}: "
                "preprocess inputs and anchors identically (same size, same scaling)"
            )
        if shape[1:] != self.image_shape:
            raise ThreatInputError(
                f"{name} has per-image shape {shape[1:]} but the anchors have {self.image_shape} "
                "(same number of values, different layout, e.g. HWC vs CHW): use the anchors' layout"
            )
        return shape

    def _flat_mask(self, mask: Any, shape: tuple[int, ...], torch_mode: bool, like: Any) -> Any:
        if torch_mode:
            import torch

            m = mask if _is_torch(mask) else torch.as_tensor(np.asarray(mask))
            m = m.to(like.device)
        else:
            m = mask.detach().cpu().numpy() if _is_torch(mask) else np.asarray(mask)
        if m.ndim != len(shape):
            raise ThreatInputError(
                f"mask must have the same number of axes as delta {shape} (broadcastable, e.g. "
                f"(B, 1, H, W) for channel-first images), got shape {tuple(m.shape)}"
            )
        try:
            np.broadcast_shapes(tuple(m.shape), shape)
        except ValueError as exc:
            raise ThreatInputError(f"mask shape {tuple(m.shape)} does not broadcast to delta {shape}") from exc
        if torch_mode:
            if not bool(((m == 0) | (m == 1)).all()):
                raise ThreatInputError("mask must be binary (0/1 or bool): PD-S selects pixels")
            return m.to(like.dtype).expand(shape).reshape(shape[0], -1)
        if not np.all((m == 0) | (m == 1)):
            raise ThreatInputError("mask must be binary (0/1 or bool): PD-S selects pixels")
        return np.broadcast_to(m.astype(np.float32), shape).reshape(shape[0], -1)

    # ------------------------------------------------------------------ the threat

    def threat(
        self,
        x: Any,
        y: Any,
        delta: Any,
        mask: Any = None,
        check_scale: bool = True,
    ) -> Any:
        """d(x_i, δ_i) for a batch: (B,) float32, numpy in → numpy out, torch in → torch out.

        ``x``, ``delta``: (B, *image_shape); ``y``: (B,) labels from :attr:`classes`;
        ``mask``: optional binary foreground mask broadcastable to ``delta`` (PD-S).
        """
        torch_mode = _is_torch(x) or _is_torch(delta)
        if torch_mode and not (_is_torch(x) and _is_torch(delta)):
            raise ThreatInputError("x and delta must both be numpy arrays or both torch tensors")
        if not torch_mode:
            x = np.asarray(x)
            delta = np.asarray(delta)
        shape = self._check_batch(x, "x")
        if tuple(delta.shape) != shape:
            raise ThreatInputError(f"delta has shape {tuple(delta.shape)}, x has {shape}: they must match")
        b = shape[0]
        cls = self.class_index(y, b)
        if torch_mode:
            return self._threat_torch(x, cls, delta, mask, check_scale)
        x2 = np.asarray(x, dtype=np.float32).reshape(b, -1)
        d2 = np.asarray(delta, dtype=np.float32).reshape(b, -1)
        if not (np.all(np.isfinite(x2)) and np.all(np.isfinite(d2))):
            raise ThreatInputError("x or delta contains NaN or infinite values")
        if check_scale:
            self._check_scale(float(np.abs(x2).max()))
        if mask is not None:
            d2 = d2 * self._flat_mask(mask, shape, False, None)
        xc = x2 - self._mean
        xx, dx = _row_dots(xc, d2)
        out = np.zeros(b, dtype=np.float32)
        fac_rows = self._factor[cls]  # (B, C)
        for s in range(0, self.anchors.shape[0], self.chunk_size):
            a = self._centred[s : s + self.chunk_size]
            aa = self._sqnorm[s : s + self.chunk_size]
            fac = fac_rows[:, self.anchor_class[s : s + self.chunk_size]]
            num = d2 @ a.T
            num -= dx[:, None]
            den = xc @ a.T
            den *= -2.0
            den += aa[None, :]
            den += xx[:, None]
            suspect = (den <= RECOMPUTE_REL * (aa[None, :] + xx[:, None])) & (fac > 0)
            if suspect.any():
                i, j = np.nonzero(suspect)
                diff = self._flat[s + j] - x2[i]  # uncentred: identical images give exactly 0
                den[i, j] = np.einsum("pd,pd->p", diff, diff)
                num[i, j] = np.einsum("pd,pd->p", d2[i], diff)
            np.maximum(num, 0.0, out=num)
            num *= fac
            ratio = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
            np.maximum(out, ratio.max(axis=1), out=out)
        return out

    def _check_scale(self, x_absmax: float) -> None:
        a = self._absmax
        if a > 0 and x_absmax > 0 and (x_absmax > SCALE_MISMATCH_FACTOR * a or a > SCALE_MISMATCH_FACTOR * x_absmax):
            raise ThreatInputError(
                f"x values reach {x_absmax:.4g} but the anchors reach {a:.4g}: inputs and anchors "
                "must have the same scaling (e.g. both in [0, 1]); pass check_scale=False if intended"
            )

    def _torch_anchors(self, device: Any) -> tuple[Any, ...]:
        key = str(device)
        if key not in self._torch_cache:
            import torch

            self._torch_cache[key] = (
                torch.from_numpy(self._centred).to(device),
                torch.from_numpy(self._sqnorm).to(device),
                torch.from_numpy(self._mean).to(device),
                torch.from_numpy(self.anchor_class).to(device),
                torch.from_numpy(self._factor).to(device),
                torch.from_numpy(self._flat).to(device),
            )
        return self._torch_cache[key]

    def _threat_torch(self, x: Any, cls: np.ndarray, delta: Any, mask: Any, check_scale: bool) -> Any:
        import torch

        device = x.device
        if delta.device != device:
            raise ThreatInputError(f"x is on {device} but delta on {delta.device}; put them on one device")
        centred, sqnorm, mean, anchor_class, factor, flat = self._torch_anchors(device)
        b = x.shape[0]
        # autocast (used when scoring models) would run the products in half precision
        with torch.no_grad(), torch.autocast(device_type=device.type, enabled=False):
            x2 = x.detach().to(torch.float32).reshape(b, -1)
            d2 = delta.detach().to(torch.float32).reshape(b, -1)
            if not bool(torch.isfinite(x2).all() and torch.isfinite(d2).all()):
                raise ThreatInputError("x or delta contains NaN or infinite values")
            if check_scale:
                self._check_scale(float(x2.abs().max()))
            if mask is not None:
                d2 = d2 * self._flat_mask(mask, tuple(delta.shape), True, d2)
            xc = x2 - mean
            xx = (xc * xc).sum(dim=1)
            dx = (d2 * xc).sum(dim=1)
            out = torch.zeros(b, dtype=torch.float32, device=device)
            fac_rows = factor[torch.from_numpy(cls).to(device)]
            for s in range(0, centred.shape[0], self.chunk_size):
                a = centred[s : s + self.chunk_size]
                aa = sqnorm[s : s + self.chunk_size]
                fac = fac_rows[:, anchor_class[s : s + self.chunk_size]]
                num = d2 @ a.T - dx[:, None]
                den = aa[None, :] - 2.0 * (xc @ a.T) + xx[:, None]
                suspect = (den <= RECOMPUTE_REL * (aa[None, :] + xx[:, None])) & (fac > 0)
                if bool(suspect.any()):
                    i, j = torch.nonzero(suspect, as_tuple=True)
                    diff = flat[s + j] - x2[i]
                    den[i, j] = (diff * diff).sum(dim=1)
                    num[i, j] = (d2[i] * diff).sum(dim=1)
                num = num.clamp_min(0.0) * fac
                pos = den > 0
                ratio = torch.where(pos, num / torch.where(pos, den, torch.ones_like(den)), torch.zeros_like(num))
                out = torch.maximum(out, ratio.max(dim=1).values)
        return out

    # ------------------------------------------------------------------ sublevel sets

    def halfspaces(self, x: Any, y: Hashable, eps: float, mask: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The sublevel set {δ : d(x, δ) <= eps} of one image as {δ : N δ <= b} (float64).

        Row j of N is m ⊙ (a_j - x) for every anchor a_j of another class with a_j != x;
        b_j = eps · β · W(y, c_j) · ||a_j - x||².
        """
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
            raise ThreatInputError(f"eps must be a finite number >= 0, got {eps!r}")
        xa = x.detach().cpu().numpy() if _is_torch(x) else np.asarray(x)
        if tuple(xa.shape) != self.image_shape:
            raise ThreatInputError(
                f"x has shape {tuple(xa.shape)} but the anchors have per-image shape {self.image_shape}"
            )
        ci = int(self.class_index(np.asarray([y]), 1)[0])
        fac = self._factor[ci, self.anchor_class].astype(np.float64)
        if self._flat64 is None:  # float64 anchors for projections, built on first use
            self._flat64 = self._flat.astype(np.float64)
        diff = self._flat64 - xa.reshape(-1).astype(np.float64)
        sq = np.einsum("md,md->m", diff, diff)
        keep = (fac > 0) & (sq > 0)
        normals = diff[keep]
        if mask is not None:
            m = mask.detach().cpu().numpy() if _is_torch(mask) else np.asarray(mask)
            try:
                m = np.broadcast_to(m, self.image_shape).reshape(-1)
            except ValueError as exc:
                raise ThreatInputError(f"mask shape {m.shape} does not broadcast to {self.image_shape}") from exc
            if not np.all((m == 0) | (m == 1)):
                raise ThreatInputError("mask must be binary (0/1 or bool): PD-S selects pixels")
            normals = normals * m.astype(np.float64)
        bounds = eps * sq[keep] / fac[keep]
        return normals, bounds


# --------------------------------------------------------------------------- run level


def unsafe_reference_threat(
    images: Any,
    labels: Any,
    pd: ProjectedDisplacement,
    n_pairs: int = 512,
    seed: int = 0,
    batch_size: int = 256,
) -> float:
    """Mean threat of the paper's "unsafe perturbations": δ = x_j - x_i, labels differ.

    Pairs: i uniform over images, j uniform over the images of other classes, drawn with
    ``numpy.random.default_rng(seed)``. Images must be preprocessed like the anchors.
    """
    arr = _as_image_batch(images, "images")
    lab = _as_labels(labels, arr.shape[0], "labels")
    if not isinstance(n_pairs, (int, np.integer)) or n_pairs < 1:
        raise ThreatInputError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    if np.unique(lab).size < 2:
        raise ThreatInputError("unsafe perturbations need images of at least two classes")
    rng = np.random.default_rng(seed)
    ii = rng.integers(arr.shape[0], size=n_pairs)
    jj = np.empty_like(ii)
    for p, i in enumerate(ii):
        jj[p] = rng.choice(np.flatnonzero(lab != lab[i]))
    total = 0.0
    for s in range(0, n_pairs, batch_size):
        i, j = ii[s : s + batch_size], jj[s : s + batch_size]
        total += float(np.sum(pd.threat(arr[i], lab[i], arr[j] - arr[i]), dtype=np.float64))
    return total / n_pairs


#: the share of a cell's images whose PD threat may exceed the threshold (1, ``run_report.SAFE_THREAT``: their label
#: may have changed) for the cell to still count as label-preserving: an accuracy measured there is off by at most this share
UNSAFE_SHARE_CUT = 0.10

Safety = Literal["safe", "borderline", "unsafe"]


def share_interval(n_above: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson (exact binomial) interval of the share of images above the threat threshold."""
    from scipy.stats import beta

    if not (0 <= n_above <= n and n > 0):
        raise ThreatInputError(f"{n_above} of {n} images above the threshold: need 0 <= n_above <= n and n > 0")
    tail = (1.0 - confidence) / 2
    low = 0.0 if n_above == 0 else float(beta.ppf(tail, n_above, n - n_above + 1))
    high = 1.0 if n_above == n else float(beta.ppf(1.0 - tail, n_above + 1, n - n_above))
    return low, high


def pd_safety(n_above: int, n: int, cut: float = UNSAFE_SHARE_CUT, confidence: float = 0.95) -> Safety:
    """The one verdict on a corruption cell, used by the report, ``show``, the UI and the exports.

    "safe": the whole ``confidence`` interval of the share of images above the threat threshold
    lies below ``cut`` (the exact binomial test of share >= cut rejects at (1 - confidence) / 2);
    "unsafe": it lies wholly above; "borderline": the images cannot tell. A mean threat below
    the threshold is not enough: a few far-moved images can hide under it.
    """
    low, high = share_interval(n_above, n, confidence)
    if high < cut:
        return "safe"
    return "unsafe" if low > cut else "borderline"


CellKey = tuple[str, int]


def severity_safety(mean_threats: Mapping[CellKey, float], threshold: float = 1.0) -> dict[CellKey, bool]:
    """Per (corruption, severity): safe (True) iff the mean PD threat is <= ``threshold``.

    Threshold 1 is the paper's (Section 4.2, about half the mean threat of unsafe
    perturbations); pass ``unsafe_reference_threat(...) / 2`` to calibrate per dataset.
    The paper's point rule on the mean; a run's report calls a cell safe by :func:`pd_safety`.
    """
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold >= 0):
        raise ThreatInputError(f"threshold must be a finite number >= 0, got {threshold!r}")
    out: dict[CellKey, bool] = {}
    for key, val in mean_threats.items():
        if val is None or not math.isfinite(float(val)) or float(val) < 0:
            raise ThreatInputError(f"mean threat of {key} is {val!r}; threats are finite and >= 0")
        out[key] = float(val) <= threshold
    return out


def max_safe_severity(safety: Mapping[CellKey, bool]) -> dict[str, int | None]:
    """Per corruption, the largest severity s with every severity <= s safe (None if s=min is unsafe)."""
    by_corr: dict[str, list[tuple[int, bool]]] = {}
    for (corr, sev), safe in safety.items():
        by_corr.setdefault(corr, []).append((int(sev), bool(safe)))
    out: dict[str, int | None] = {}
    for corr, cells in by_corr.items():
        best: int | None = None
        for sev, safe in sorted(cells):
            if not safe:
                break
            best = sev
        out[corr] = best
    return out


def safe_accuracy(
    accuracies: Mapping[CellKey, float],
    safety: Mapping[CellKey, bool],
    weights: Mapping[CellKey, float] | None = None,
) -> float | None:
    """Mean accuracy over the safe (corruption, severity) cells; None when no cell is safe.

    ``weights`` (e.g. image counts per cell) turn the mean into a weighted mean. Every
    accuracy cell needs a safety flag; a missing one raises rather than being skipped.
    """
    missing = [k for k in accuracies if k not in safety]
    if missing:
        raise ThreatInputError(f"no safety flag for cells {missing[:5]}; compute severity_safety for every cell")
    num = 0.0
    den = 0.0
    for key, acc in accuracies.items():
        if not safety[key]:
            continue
        a = float(acc)
        if not (math.isfinite(a) and 0.0 <= a <= 1.0):
            raise ThreatInputError(f"accuracy of {key} is {acc!r}; accuracies are in [0, 1]")
        w = 1.0 if weights is None else float(weights[key])
        if not (math.isfinite(w) and w >= 0):
            raise ThreatInputError(f"weight of {key} is {w!r}; weights are finite and >= 0")
        num += w * a
        den += w
    return None if den == 0 else num / den


__all__ = [
    "AnchorWarning",
    "ProjectedDisplacement",
    "ThreatInputError",
    "euclidean_class_distances",
    "max_safe_severity",
    "pd_safety",
    "project_exact",
    "project_radial",
    "relative_class_weights",
    "safe_accuracy",
    "select_anchor_indices",
    "select_anchors",
    "severity_safety",
    "share_interval",
    "unsafe_reference_threat",
]
