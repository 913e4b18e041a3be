"""Building blocks of the ImageNet-C corruptions (``imagecorruptions`` 1.1.2), re-implemented for speed.

Each helper reproduces the reference's construction (same geometry, same formulas) with cv2 or
vectorised numpy instead of scipy/scikit-image calls and Python loops over pixels; the random
values come from the kernel's ``numpy.random.Generator``. ``benchmarks/imagenet_c_fidelity.py``
compares the corruptions built on them with the reference cell by cell.
"""

from __future__ import annotations

import math
from functools import lru_cache

import cv2
import numpy as np

#: ImageNet-C's versions of the corruptions share this ladder version (see CorruptionSpec.ladder_version)
IMAGENET_C_LADDER_VERSION = 2


@lru_cache(maxsize=64)
def motion_trail_kernel(radius: float, sigma: float, angle_deg: float) -> tuple[np.ndarray, tuple[int, int]]:
    """ImageNet-C's one-sided motion trail as a correlation kernel and its anchor.

    The reference sums ``width = 2 * radius + 1`` copies of the image shifted by
    ``(-ceil(i * cos(angle) - 0.5), -ceil(i * sin(angle) - 0.5))`` (edges replicated), weighted
    by a half Gaussian ``exp(-i^2 / 2 sigma^2)``: a trail on one side only, which also shifts the
    image. The same weights placed in one kernel give that sum in one ``cv2.filter2D`` with
    ``BORDER_REPLICATE``.
    """
    width = int(round(2 * radius + 1))
    i = np.arange(width, dtype=np.float64)
    weights = np.exp(-(i**2) / (2 * sigma**2))
    weights /= weights.sum()
    theta = np.deg2rad(angle_deg)
    py, px = width * np.sin(theta), width * np.cos(theta)
    hyp = math.hypot(py, px)
    dy = -np.ceil(i * py / hyp - 0.5).astype(int)
    dx = -np.ceil(i * px / hyp - 0.5).astype(int)
    # out[y, x] = sum_i w_i * img[y - dy_i, x - dx_i]; filter2D: out = sum K[u, v] * img[y + u - ay, x + v - ax]
    r = int(max(np.abs(dy).max(), np.abs(dx).max()))
    size = 2 * r + 1
    k = np.zeros((size, size), np.float32)
    np.add.at(k, (r - dy, r - dx), weights.astype(np.float32))
    return k, (r, r)


def motion_trail(x: np.ndarray, radius: float, sigma: float, angle_deg: float) -> np.ndarray:
    """float32 (H, W[, C]) image blurred with ImageNet-C's one-sided motion trail (``_motion_blur``)."""
    k, anchor = motion_trail_kernel(float(radius), float(sigma), float(angle_deg))
    src = np.ascontiguousarray(x, dtype=np.float32)
    if src.ndim == 3 and src.shape[-1] == 1:
        return cv2.filter2D(src[..., 0], -1, k, anchor=anchor, borderType=cv2.BORDER_REPLICATE)[..., None]
    return cv2.filter2D(src, -1, k, anchor=anchor, borderType=cv2.BORDER_REPLICATE)


def _linear_taps(n_out: int, n_in: int, top: int, keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scipy.ndimage.zoom's order-1 sampling (corners onto corners) of the first ``keep`` outputs."""
    scale = (n_in - 1) / max(n_out - 1, 1)
    pos = np.arange(keep, dtype=np.float64) * scale
    i0 = np.clip(np.floor(pos).astype(np.int64), 0, n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    f = (pos - i0).astype(np.float32)
    return i0 + top, i1 + top, f


def clipped_zoom(x: np.ndarray, zoom: float) -> np.ndarray:
    """ImageNet-C's ``clipped_zoom``: centre crop of ceil(side / zoom), scaled by ``zoom`` (order 1), top-left H x W.

    scipy's ``zoom`` (grid_mode False) maps the corners of the crop onto the corners of an output
    of ``round(crop * zoom)`` pixels; here as two separable linear interpolations (gathers) of
    only the rows and columns that are kept.
    """
    h, w = x.shape[:2]
    ch0 = int(np.ceil(h / zoom))
    ch1 = int(np.ceil(w / zoom))
    top0 = (h - ch0) // 2
    top1 = (w - ch1) // 2
    out0 = int(round(ch0 * zoom))
    out1 = int(round(ch1 * zoom))
    y0, y1, fy = _linear_taps(out0, ch0, top0, min(h, out0))
    x0, x1, fx = _linear_taps(out1, ch1, top1, min(w, out1))
    src = np.asarray(x, dtype=np.float32)
    shape = (-1,) + (1,) * (src.ndim - 1)
    rows = src[y0] * (1 - fy).reshape(shape) + src[y1] * fy.reshape(shape)
    shape = (1, -1) + (1,) * (src.ndim - 2)
    return rows[:, x0] * (1 - fx).reshape(shape) + rows[:, x1] * fx.reshape(shape)


def plasma_fractal(mapsize: int, wibbledecay: float, rng: np.random.Generator) -> np.ndarray:
    """ImageNet-C's diamond-square height map (``plasma_fractal``), values in [0, 1], float64."""
    assert mapsize & (mapsize - 1) == 0
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize = mapsize
    wibble = 100.0

    def wibbledmean(array: np.ndarray) -> np.ndarray:
        return array / 4 + wibble * rng.uniform(-wibble, wibble, array.shape)

    while stepsize >= 2:
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(squareaccum)
        drgrid = maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=0) + ulgrid + np.roll(ulgrid, -1, axis=1)
        maparray[0:mapsize:stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=1) + ulgrid + np.roll(ulgrid, -1, axis=0)
        maparray[stepsize // 2 : mapsize : stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def next_power_of_2(x: int) -> int:
    return 1 if x == 0 else 2 ** (x - 1).bit_length()


def gaussian_nearest(x: np.ndarray, sigma: float, truncate: float = 4.0) -> np.ndarray:
    """scikit-image's ``filters.gaussian`` (mode 'nearest', truncate 4) per channel, float32."""
    r = max(1, int(truncate * sigma + 0.5))
    src = np.ascontiguousarray(x, dtype=np.float32)
    out = cv2.GaussianBlur(src, (2 * r + 1, 2 * r + 1), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REPLICATE)
    if out.ndim < src.ndim:
        out = out[..., None]
    return out


def sequential_swap_sources(h: int, w: int, delta: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Flat source index per pixel after ImageNet-C glass_blur's sequential local "swaps".

    The reference walks the pixels from bottom-right to top-left and, for each, writes
    ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` with a random neighbour at offset [-delta, delta)
    per axis. Its operands are numpy views, so this copies the neighbour's *current* value into
    (h, w) and leaves the neighbour as it is. A neighbour already visited (later in raster order)
    holds a copied value, so displacements chain (mean 2.0 / 3.8 / 5.4 px at deltas 1 / 2 / 3
    rather than the 1.2 / 2.6 / 4.0 px of independent swaps).

    Vectorised: every visited pixel points at its neighbour; a pointer to a visited pixel with a
    larger flat index (visited earlier) is followed to the end of its chain by pointer doubling
    (a few passes over the image), which gives every pixel its original source at once.
    """
    n = h * w
    sources = np.arange(n, dtype=np.int64)
    hs = np.arange(h - delta, delta, -1)
    ws = np.arange(w - delta, delta, -1)
    if hs.size == 0 or ws.size == 0:
        return sources
    visited_idx = (hs[:, None] * w + ws[None, :]).ravel()
    visited = np.zeros(n, bool)
    visited[visited_idx] = True
    for _ in range(iterations):
        d = rng.integers(-delta, delta, size=(visited_idx.size, 2))
        nb = visited_idx + d[:, 1] * w + d[:, 0]  # (dx, dy) in the reference's draw order
        chain = visited[nb] & (nb > visited_idx)
        jump = np.arange(n, dtype=np.int64)  # fixed points: pixels whose value is settled
        value = np.arange(n, dtype=np.int64)  # settled pixels: where their value comes from
        jump[visited_idx[chain]] = nb[chain]
        value[visited_idx[~chain]] = nb[~chain]
        while True:
            nxt = jump[jump]
            if np.array_equal(nxt, jump):
                break
            jump = nxt
        sources = sources[value[jump]]
    return sources


def hsv_value_shift(x: np.ndarray, delta: float) -> np.ndarray:
    """RGB float in [0, 1] with the HSV value raised by ``delta`` (clipped to 1), hue and saturation kept.

    With hue and saturation fixed, every channel is proportional to the value V = max(R, G, B),
    so the HSV round trip of the reference reduces to scaling each pixel by V' / V.
    """
    v = x.max(axis=-1, keepdims=True)
    v_new = np.clip(v + np.float32(delta), 0, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = x * (v_new / v)
    return np.where(v > 0, scaled, v_new)


def saturation_ratio(v: np.ndarray, mn: np.ndarray, factor: float, offset: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HSV saturation S of pixels with brightest channel ``v`` and darkest ``mn`` (float32), S' = clip(S * factor + offset, 0, 1),
    and S' / S (0 where S is 0): how much each channel's distance to ``v`` scales."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, (v - mn) / v, 0)
        s_new = np.clip(s * np.float32(factor) + np.float32(offset), 0, 1)
        ratio = np.where(s > 0, s_new / s, 0)
    return s, s_new, ratio


def hsv_saturation_affine(x: np.ndarray, factor: float, offset: float) -> np.ndarray:
    """RGB float in [0, 1] with HSV saturation S -> clip(S * factor + offset, 0, 1), hue and value kept.

    Each channel is V - V * S * f(H); scaling S scales (V - channel). A grey pixel (S = 0) has
    hue 0 in scikit-image, so a positive offset makes it red: (V, V (1 - S'), V (1 - S')).
    """
    v = x.max(axis=-1, keepdims=True)
    mn = x.min(axis=-1, keepdims=True)
    s, s_new, ratio = saturation_ratio(v, mn, factor, offset)
    out = v - (v - x) * ratio
    grey = (s <= 0)[..., 0]
    if offset > 0 and grey.any():
        vg = v[grey]
        sg = s_new[grey]
        red = np.concatenate([vg, vg * (1 - sg), vg * (1 - sg)], axis=-1)
        out[grey] = red
    return out
