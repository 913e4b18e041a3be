"""Occlusion family on the device: rectangles and shadow polygons drawn from the CPU kernel's numpy streams, filled on the device."""

from __future__ import annotations

import numpy as np
import torch

from domainbench.corruptions.device.common import DeviceBatch, empty, lookup, pair_index
from domainbench.corruptions.device.registry import device_kernel
from domainbench.corruptions.kernels.occlusion import OccluderParams, ShadowParams, occluder_boxes, shadow_polygons


@device_kernel("occluder", exact=True, note="boxes and shades drawn from the CPU kernel's numpy streams", cpu_chunk=None)
def occluder(images: torch.Tensor, p: OccluderParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, c = images.shape
    boxes = [occluder_boxes(h, w, c, p, rng) for rng in b.rngs]
    host = np.stack([shade for image in boxes for *_, shade in image])
    out = empty(tuple(images.shape), images.dtype, images.device).copy_(images)  # half a clone's cost on a CPU
    # painting a box is one strided fill: on a CPU through the tensor's numpy view (a torch slice
    # assignment costs ~10 us of dispatch, several times numpy's), elsewhere with every shade moved
    # to the device in one transfer
    target = out.numpy() if out.device.type == "cpu" else out
    shades = host if out.device.type == "cpu" else torch.from_numpy(host).to(out.device)
    j = 0
    for image, painted in zip(target, boxes):
        for y, x, rh, rw, _ in painted:
            image[y : y + rh, x : x + rw] = shades[j]
            j += 1
    return out


def fill_polygons(h: int, w: int, edges: torch.Tensor) -> torch.Tensor:
    """(N, H, W) bool: inside each image's polygon, given as (N, E, 2, 2) edges (x, y end points; padding
    edges horizontal), filled by cv2.fillPoly's scanline rule without its outline.

    Row y crosses the edges with y0 <= y < y1 at x rounded to a pixel; pixels from the first to the
    second crossing, the third to the fourth ... (both ends included) are inside. Counting crossings
    at or left of every pixel (a scatter of the crossings and a cumulative sum along the row) gives
    that for all rows of the batch at once.
    """
    n = edges.shape[0]
    (x0, y0), (x1, y1) = edges[:, :, 0].unbind(-1), edges[:, :, 1].unbind(-1)
    top_x = torch.where(y0 < y1, x0, x1)
    top, bottom = torch.minimum(y0, y1), torch.maximum(y0, y1)
    slope = (x1 - x0) / (y1 - y0).where(y1 != y0, torch.ones_like(y0))
    ys = torch.arange(h, dtype=edges.dtype, device=edges.device)
    crossing = torch.floor(top_x[..., None] + 0.5 + (ys - top[..., None]) * slope[..., None])  # (N, E, H)
    active = (ys >= top[..., None]) & (ys < bottom[..., None])
    # bin j counts crossings at x = j - 1: left of the image in bin 0, right of it in bin W + 1
    bins = (crossing + 1).clamp_(0, w + 1).long()
    counts = torch.zeros((n, h, w + 2), dtype=torch.int16, device=edges.device)
    counts.scatter_add_(2, bins.permute(0, 2, 1), active.permute(0, 2, 1).to(torch.int16))
    at_or_left = counts.cumsum(2, dtype=torch.int16)
    # inside a span: an odd count strictly left of x (x is in one) or at x (x is its right end)
    return ((at_or_left[..., 1 : w + 1] | at_or_left[..., :w]) & 1).bool()


@device_kernel("shadow", exact=False, note="polygons drawn from the CPU kernel's numpy streams; filled by fillPoly's "
               "scanline rule without its outline, so pixels along the polygon edges can differ")
def shadow(images: torch.Tensor, p: ShadowParams, b: DeviceBatch) -> torch.Tensor:
    n, h, w, _ = images.shape
    polygons = [shadow_polygons(h, w, p, rng) for rng in b.rngs]
    most = max(len(poly) for image in polygons for poly in image)
    depth = torch.zeros((n, h, w), dtype=torch.uint8, device=images.device)
    for i in range(p.num_shadows):
        # edges (previous vertex, vertex); padded with the last vertex's horizontal (skipped) edges
        edges = np.stack([np.stack([np.roll(np.pad(poly, ((0, most - len(poly)), (0, 0)), mode="edge"), 1, axis=0),
                                    np.pad(poly, ((0, most - len(poly)), (0, 0)), mode="edge")], axis=1)
                          for poly in (image[i] for image in polygons)])
        depth += fill_polygons(h, w, torch.from_numpy(edges.astype(np.float32)).to(images.device))
    # albumentations darkens shadow by shadow, truncating each time: floor(v * (1 - darkness)) per layer,
    # so a value's result depends only on (depth, value): one lookup in a (layers + 1) x 256 table
    levels = [torch.arange(256, dtype=torch.uint8, device=images.device)]
    for _ in range(p.num_shadows):
        levels.append(levels[-1].float().mul_(1 - p.darkness).floor_().to(torch.uint8))
    table = torch.cat(levels)
    # the depth per value (not broadcast along the channels, a slow path on a CPU) picks the row
    return lookup(table, pair_index(depth[..., None].expand(images.shape), images))
