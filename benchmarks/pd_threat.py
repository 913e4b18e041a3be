"""PD threat: matrix-product form vs the direct per-anchor loop, on the same inputs.

Default: 500 inputs of 3×64×64 against 10 classes × 50 anchors (issue 7's target: the
matrix form >= 20× faster on CPU, equal to the loop to 1e-5 relative). Prints the speed
ratio against a float32 loop (same precision) and a float64 loop (the accuracy reference),
the largest relative difference to the float64 loop, and peak memory (tracemalloc for the
numpy path; torch.cuda.max_memory_allocated with ``--device cuda``).

    .venv/bin/python benchmarks/pd_threat.py            # full
    .venv/bin/python benchmarks/pd_threat.py --quick    # ~seconds
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domainbench.metrics.threat import ProjectedDisplacement  # noqa: E402
from tests.oracles.pd_threat_loop import threat_per_anchor_loop  # noqa: E402


#: threats below this are compared in absolute terms only
REL_FLOOR = 1e-3


def smooth_images(rng: np.random.Generator, n: int, shape: tuple[int, int, int]) -> np.ndarray:
    """Images in [0, 1] with spatial structure (upsampled 4×4 fields plus a little noise)."""
    c, h, w = shape
    out = np.empty((n, c, h, w), np.float32)
    for s in range(0, n, 64):
        m = min(64, n - s)
        coarse = rng.random((m, c, 4, 4), dtype=np.float32)
        up = np.kron(coarse, np.ones((1, 1, math.ceil(h / 4), math.ceil(w / 4)), np.float32))[:, :, :h, :w]
        out[s : s + m] = np.clip(0.8 * up + 0.2 * rng.random((m, c, h, w), dtype=np.float32), 0, 1)
    return out


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_mib(fn) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 inputs, 10×10 anchors, one repeat")
    ap.add_argument("--n-inputs", type=int, default=500)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--shape", type=int, nargs=3, default=(3, 64, 64))
    ap.add_argument("--chunk-size", type=int, default=1024)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="cap BLAS threads (threadpoolctl); default: all")
    args = ap.parse_args()
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=args.threads, user_api="blas")
    if args.quick:
        args.n_inputs, args.per_class, args.repeats = 100, 10, 2
    shape = tuple(args.shape)

    rng = np.random.default_rng(args.seed)
    n_anchor = args.classes * args.per_class
    anchors = smooth_images(rng, n_anchor, shape)
    anchor_labels = np.repeat(np.arange(args.classes), args.per_class)
    x = smooth_images(rng, args.n_inputs, shape)
    y = rng.integers(0, args.classes, args.n_inputs)
    # half noise-like corruptions, half unsafe perturbations (towards random anchors)
    delta = rng.normal(0, 0.1, x.shape).astype(np.float32)
    half = args.n_inputs // 2
    delta[:half] = anchors[rng.integers(0, n_anchor, half)] - x[:half]
    pd = ProjectedDisplacement(anchors, anchor_labels, chunk_size=args.chunk_size)

    d = math.prod(shape)
    print(f"PD threat benchmark: {args.n_inputs} inputs of {'x'.join(map(str, shape))} (d={d}), "
          f"{args.classes} classes x {args.per_class} anchors, chunk_size={args.chunk_size}, device={args.device}, "
          f"BLAS threads={args.threads or 'all'}")

    pd.threat(x[:8], y[:8], delta[:8])  # warm-up (BLAS threads, page faults)
    t_mat, got = best_time(lambda: pd.threat(x, y, delta), args.repeats)
    t_loop32, _ = best_time(lambda: threat_per_anchor_loop(anchors, anchor_labels, x, y, delta, dtype=np.float32), 1)
    t_loop64, ref = best_time(lambda: threat_per_anchor_loop(anchors, anchor_labels, x, y, delta), 1)
    diff = np.abs(np.asarray(got, np.float64) - ref)
    # relative accuracy is meaningful where the threat is not ~0 (a δ orthogonal to every
    # unsafe direction has threat ~0, known to float32 only up to an absolute error)
    big = ref >= REL_FLOOR
    rel = diff[big] / ref[big]

    print(f"  matrix form (numpy, float32): {t_mat * 1e3:9.1f} ms  (best of {args.repeats})")
    print(f"  direct loop (float32):        {t_loop32 * 1e3:9.1f} ms  -> speed-up {t_loop32 / t_mat:6.1f}x")
    print(f"  direct loop (float64):        {t_loop64 * 1e3:9.1f} ms  -> speed-up {t_loop64 / t_mat:6.1f}x")
    print(f"  max relative difference to the float64 loop: {rel.max():.2e} over the {big.sum()} threats "
          f">= {REL_FLOOR:g} (median {np.median(rel):.2e}); max absolute difference over all "
          f"{ref.size}: {diff.max():.2e} (threats {ref.min():.3g}..{ref.max():.3g})")

    inputs_mib = (x.nbytes + delta.nbytes) / 2**20
    print(f"  inputs x + delta: {inputs_mib:.1f} MiB; anchors: {anchors.nbytes / 2**20:.1f} MiB")
    for cs in sorted({args.chunk_size, 64}):
        p = ProjectedDisplacement(anchors, anchor_labels, chunk_size=cs)
        mib = peak_mib(lambda: p.threat(x, y, delta))
        print(f"  peak traced memory, matrix form, chunk_size={cs:5d}: {mib:8.1f} MiB")
    sub = slice(0, min(100, args.n_inputs))
    print(f"  peak traced memory, float64 loop ({sub.stop} inputs):  "
          f"{peak_mib(lambda: threat_per_anchor_loop(anchors, anchor_labels, x[sub], y[sub], delta[sub])):8.1f} MiB")

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("  cuda: not available on this machine")
        else:
            xt, dt, yt = (torch.from_numpy(v).cuda() for v in (x, delta, y))
            pd.threat(xt, yt, dt)  # warm-up: anchors to the device, kernels
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()

            def run():
                out = pd.threat(xt, yt, dt)
                torch.cuda.synchronize()
                return out

            t_gpu, out_gpu = best_time(run, max(args.repeats, 5))
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            rel_gpu = np.abs(out_gpu.cpu().numpy().astype(np.float64) - ref)[big] / ref[big]
            print(f"  matrix form (torch, {torch.cuda.get_device_name()}): {t_gpu * 1e3:8.2f} ms; "
                  f"speed-up vs float32 CPU loop {t_loop32 / t_gpu:7.1f}x; max rel diff {rel_gpu.max():.2e}; "
                  f"peak extra GPU memory {peak:.1f} MiB")

    ok = t_loop32 / t_mat >= 20 and rel.max() <= 1e-5
    scope = " (quick run: the speed target is set for the full size)" if args.quick else ""
    print(f"targets (>= 20x vs the float32 loop, <= 1e-5 relative): {'met' if ok else 'NOT met'}{scope}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
