"""One command for the GPU path: forward throughput, end-to-end throughput, corruption on CPU vs device.

With a GPU: builds open_clip ``ViT-B-32`` and ``ViT-L-14`` and transformers SigLIP base (vision
tower) from their configs with random weights (no download), and for N synthetic 224x224 images
x C cells prints per model: bare forward img/s (preprocessed pixels already on the GPU),
end-to-end img/s with corruption on the CPU (numpy kernels on worker processes, one shard of
look-ahead, as the engine) and on the device (torch kernels), each end-to-end rate's ratio to
the bare forward, and the mean GPU utilisation while it ran (nvidia-smi). Before timing it checks
every device kernel on the GPU against its CPU kernel (``device_check``) and leaves failing ones out.

Without a GPU it says so and measures instead, per corruption, the batched torch device kernels
on CPU against the numpy kernels: one thread each, a batch of 256 photographs at 224x224,
severity 3, least CPU time per image over 5 or more interleaved rounds (at least a second of each path)
and the ratio numpy / torch (> 1: the torch path is faster).
Corruptions without a device kernel are listed as such.

    python benchmarks/gpu.py [--quick] [--only NAME ...] [--images N] [--cells C] [--batch B]
"""

from __future__ import annotations

import os

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the engine's host memory settings (huge pages for torch, heap reuse for temporaries), before torch loads
from domainbench.runtime import host_memory  # noqa: E402

host_memory.configure()

import argparse  # noqa: E402
import itertools  # noqa: E402
import multiprocessing as mp  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from concurrent.futures import Future, ProcessPoolExecutor  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_sample_image  # noqa: E402

from domainbench import corruptions  # noqa: E402
from domainbench.corruptions import device as device_kernels  # noqa: E402

SIZE = 224
MEAN = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
STD = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)


def photos(n: int, seed: int = 0) -> np.ndarray:
    """n distinct 224x224 crops of the two scikit-learn sample photographs (uint8, (n, 224, 224, 3))."""
    rng = np.random.default_rng(seed)
    sources = [cv2.resize(load_sample_image(name), (480, 360), interpolation=cv2.INTER_AREA) for name in ("china.jpg", "flower.jpg")]
    out = np.empty((n, SIZE, SIZE, 3), np.uint8)
    for i in range(n):
        src = sources[i % 2]
        y, x = int(rng.integers(0, src.shape[0] - SIZE)), int(rng.integers(0, src.shape[1] - SIZE))
        crop = src[y : y + SIZE, x : x + SIZE]
        out[i] = crop[:, ::-1] if rng.random() < 0.5 else crop
    return out


#: rounds of a quick kernel are added until each function has run about this long (CPU seconds)
MIN_TOTAL_S = 1.0


def best_of(fns: list[Callable[[], object]], repeats: int, max_repeats: int = 40) -> list[float]:
    """Least CPU time of this process of each of ``fns`` over at least ``repeats`` rounds, the
    functions taking turns within a round: both paths run on one thread, and CPU time (unlike wall
    time) is not inflated by waiting. On a shared machine other load still slows memory-bound code;
    taking turns gives every function the same quiet and busy spells, so a ratio does not depend on
    which ran first. Functions that take milliseconds (a flip of 256 images) get more rounds, up to
    ``max_repeats``, as timeit's autorange does, so one slow round cannot decide their ratio."""
    best = [float("inf")] * len(fns)
    total = [0.0] * len(fns)
    rounds = 0
    while rounds < repeats or (rounds < max_repeats and min(total) < MIN_TOTAL_S):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            elapsed = time.process_time() - t0
            best[i], total[i] = min(best[i], elapsed), total[i] + elapsed
        rounds += 1
    return best


# -- no GPU: torch device kernels on CPU against the numpy kernels --------------------------------


def cpu_table(names: list[str], batch: int, repeats: int) -> None:
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    images = photos(batch)
    seeds = list(range(1000, 1000 + batch))
    warm = images[:4]
    rows: list[tuple[str, float, float | None]] = []
    print(f"{'corruption':24s} {'numpy ms/img':>13s} {'torch ms/img':>13s} {'numpy/torch':>12s}")
    for name in names:
        corruptions.corrupt_batch(warm, name, severity=3, seeds=seeds[:4])  # first-call set-up (registry, imports)
        numpy_path = lambda: corruptions.corrupt_batch(images, name, severity=3, seeds=seeds)  # noqa: E731
        if not device_kernels.has_kernel(name):
            t_np = best_of([numpy_path], repeats)[0] / batch
            rows.append((name, t_np, None))
            print(f"{name:24s} {t_np * 1e3:13.3f} {'-':>13s} {'no device kernel yet':>12s}", flush=True)
            continue
        x = torch.from_numpy(images)
        device_kernels.corrupt_batch(torch.from_numpy(warm), name, severity=3, seeds=seeds[:4])  # first-call set-up
        torch_path = lambda: device_kernels.corrupt_batch(x, name, severity=3, seeds=seeds)  # noqa: E731
        t_np, t_tc = (t / batch for t in best_of([numpy_path, torch_path], repeats))
        rows.append((name, t_np, t_tc))
        print(f"{name:24s} {t_np * 1e3:13.3f} {t_tc * 1e3:13.3f} {t_np / t_tc:12.2f}", flush=True)
    with_kernel = [(n, a, b) for n, a, b in rows if b is not None]
    faster = [n for n, a, b in with_kernel if b <= a]
    ratios = np.array([a / b for _, a, b in with_kernel])
    print(f"\ntorch at least as fast per image: {len(faster)} of {len(with_kernel)} corruptions with a device kernel, "
          f"{len(faster)} of {len(rows)} in the catalogue measured (acceptance: two thirds of the corruptions)")
    if len(ratios):
        print(f"geometric mean numpy/torch over the device kernels: {float(np.exp(np.log(ratios).mean())):.2f}x")
    slower = [n for n, a, b in with_kernel if b > a]
    if slower:
        print(f"torch slower on CPU: {', '.join(slower)}")


# -- with a GPU: forward vs end to end ------------------------------------------------------------


MODELS = ("open_clip ViT-B-32", "open_clip ViT-L-14", "SigLIP base (transformers)")


def build_model(name: str, dev: torch.device) -> torch.nn.Module:
    """An image tower with random weights, built from its config (nothing is downloaded)."""
    if name.startswith("open_clip "):
        import open_clip

        model = open_clip.create_model(name.removeprefix("open_clip "), pretrained=None).visual
    else:
        from transformers import SiglipVisionConfig, SiglipVisionModel

        model = SiglipVisionModel(SiglipVisionConfig())  # defaults: SigLIP base, patch 16, 224
    return model.to(dev).eval()


class Utilisation:
    """Mean GPU utilisation (%) sampled from nvidia-smi every 0.2 s while the context is open."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Utilisation:
        if shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        index = str(torch.cuda.current_device())
        while not self._stop.wait(0.2):
            out = subprocess.run(["nvidia-smi", "-i", index, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                self.samples.append(float(out.stdout.strip().splitlines()[0]))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean(self) -> str:
        return f"{np.mean(self.samples):.0f}%" if self.samples else "n/a"


def _normalise(x: torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 on the device -> normalised (N, 3, H, W) float."""
    x = x.permute(0, 3, 1, 2).float().div_(255.0)
    return (x - MEAN.to(x.device)) / STD.to(x.device)


def _forward(model: torch.nn.Module, pixels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    with torch.inference_mode(), torch.autocast(pixels.device.type, dtype=dtype, enabled=pixels.device.type == "cuda"):
        out = model(pixels)
    return out.pooler_output if hasattr(out, "pooler_output") else out


def _cpu_job(images: np.ndarray, name: str, seeds: list[int]) -> np.ndarray:
    cv2.setNumThreads(1)
    return corruptions.corrupt_batch(images, name, severity=3, seeds=seeds)


def pipeline(model: torch.nn.Module, images: np.ndarray, cells: list[str], batch: int, site: str, dev: torch.device,
             dtype: torch.dtype, pool: ProcessPoolExecutor | None, lookahead: int) -> float:
    """Seconds to corrupt every image for every cell and encode it, with one batch of look-ahead."""

    def jobs() -> Iterator[tuple[str, np.ndarray, list[int]]]:
        for name in cells:
            for i in range(0, len(images), batch):
                yield name, images[i : i + batch], list(range(i, i + min(batch, len(images) - i)))

    def submit(name: str, chunk: np.ndarray, seeds: list[int]) -> Future | torch.Tensor:
        if site == "device":
            host = torch.from_numpy(chunk)
            x = (host.pin_memory() if dev.type == "cuda" else host).to(dev, non_blocking=True)
            # queued on the stream: the corruption of batch k+1 overlaps nothing on the host
            return device_kernels.corrupt_batch(x, name, severity=3, seeds=seeds)
        assert pool is not None
        return pool.submit(_cpu_job, chunk, name, seeds)

    def ready(item: Future | torch.Tensor) -> torch.Tensor:
        if isinstance(item, torch.Tensor):
            return item
        host = torch.from_numpy(item.result())
        return (host.pin_memory() if dev.type == "cuda" else host).to(dev, non_blocking=True)

    t0 = time.perf_counter()
    it = jobs()
    queue: list[Future | torch.Tensor] = [submit(*job) for job in itertools.islice(it, lookahead)]
    preds: list[torch.Tensor] = []
    while queue:
        item = queue.pop(0)
        nxt = next(it, None)
        if nxt is not None:
            queue.append(submit(*nxt))
        out = _forward(model, _normalise(ready(item)), dtype)
        preds.append(out.argmax(dim=1))  # stays on the device: no sync inside the loop
    torch.cat(preds).cpu()  # the one host copy
    return time.perf_counter() - t0


def device_check(dev: torch.device, n: int = 8) -> list[str]:
    """Every device kernel on ``dev`` against its CPU kernel, before anything is timed: exact kernels'
    largest pixel difference (<= 1 expected), random ones' std of the change to clean (within 5%).
    Returns the corruptions that fail, so the timing table can leave them out."""
    images = photos(n)
    seeds = list(range(7, 7 + n))
    failed = []
    print(f"device kernels on {dev} against the CPU kernels ({n} photographs, severity 3):")
    for name, kernel in sorted(device_kernels.kernels().items()):
        cpu = corruptions.corrupt_batch(images, name, severity=3, seeds=seeds).astype(np.float64)
        try:
            out = device_kernels.corrupt_batch(torch.from_numpy(images).to(dev), name, severity=3, seeds=seeds).cpu().numpy()
        except Exception as e:  # a kernel that breaks on this device must not hide the others' results
            failed.append(name)
            print(f"  {name:22s} FAILED: {type(e).__name__}: {e}")
            continue
        if kernel.exact:
            worst = float(np.abs(out - cpu).max())
            ok = worst <= 1
            verdict = f"max difference {worst:.0f} grey level(s)"
        else:
            a, b = float((cpu - images).std()), float((out - images.astype(np.float64)).std())
            ok = abs(a - b) <= 0.05 * max(a, 1e-9)
            verdict = f"std of change {b:.2f} vs CPU {a:.2f}"
        if not ok:
            failed.append(name)
        print(f"  {name:22s} {'ok  ' if ok else 'BAD '} {'exact' if kernel.exact else 'random'}: {verdict}")
    return failed


def gpu_table(dev: torch.device, n_images: int, n_cells: int, batch: int, workers: int, only_models: list[str] | None) -> None:
    dtype = torch.bfloat16 if dev.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float16
    images = photos(n_images)
    broken = device_check(dev)
    cells = [n for n in device_kernels.names() if n != "jpeg_compression" and n not in broken][:n_cells]
    print(f"{n_images} images x {len(cells)} cells ({', '.join(cells)}), batch {batch}, autocast {dtype}, {workers} CPU workers")
    chosen = [m for m in MODELS if not only_models or any(o in m for o in only_models)]
    # spawn, not fork: forked children of a process with running torch/OpenMP threads can deadlock
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) if workers > 0 else None
    lookahead = max(2, 2 * workers)  # batches in flight: enough to keep every worker busy
    header = f"{'model':28s} {'forward img/s':>14s} {'e2e cpu img/s':>14s} {'ratio':>6s} {'util':>5s} {'e2e dev img/s':>14s} {'ratio':>6s} {'util':>5s}"
    print(header)
    try:
        for name in chosen:
            model = build_model(name, dev)  # one at a time: ViT-L-14 and the others need not share the GPU
            pixels = _normalise(torch.from_numpy(images[:batch]).to(dev))
            _forward(model, pixels, dtype)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            n_fwd = n_images * len(cells)
            t0 = time.perf_counter()
            for _ in range(0, n_fwd, batch):
                _forward(model, pixels, dtype).argmax(dim=1)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            bare = n_fwd / (time.perf_counter() - t0)
            rates, utils = [], []
            for site in ("cpu", "device"):
                with Utilisation() as util:
                    seconds = pipeline(model, images, cells, batch, site, dev, dtype, pool, lookahead)
                rates.append(n_fwd / seconds)
                utils.append(util.mean if dev.type == "cuda" else "n/a")
            print(f"{name:28s} {bare:14.0f} {rates[0]:14.0f} {rates[0] / bare:6.2f} {utils[0]:>5s} {rates[1]:14.0f} {rates[1] / bare:6.2f} {utils[1]:>5s}",
                  flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    print("target: end-to-end >= 0.9 x bare forward for ViT-B-32 with corruption on the device")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small batch / few images: a smoke run")
    ap.add_argument("--only", nargs="*", help="corruptions to measure (CPU table)")
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--batch", type=int, default=None, help="images per batch (default 256; --quick 64)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2), help="CPU corruption workers (GPU mode)")
    ap.add_argument("--models", nargs="*", help="substrings of the model names to measure (GPU mode; default all three)")
    ap.add_argument("--pipeline-on-cpu", action="store_true", help="run the GPU pipeline on the CPU (a smoke test of the code path)")
    args = ap.parse_args()
    batch = args.batch or (64 if args.quick else 256)
    if torch.cuda.is_available() or args.pipeline_on_cpu:
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        n_images, n_cells = (1_000, 2) if args.quick else (args.images, args.cells)
        if args.pipeline_on_cpu and dev.type == "cpu":
            n_images, n_cells, batch = min(n_images, 2 * batch), min(n_cells, 2), min(batch, 8)
        print(f"device: {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'CPU (pipeline smoke test)'}")
        gpu_table(dev, n_images, n_cells, batch, args.workers, args.models)
        return
    print("no GPU: CUDA is not available on this machine, so the GPU targets (forward vs end-to-end, utilisation) are "
          "not measured.\nMeasuring the torch device kernels on CPU against the numpy kernels instead "
          f"(one thread each, batch of {batch} at {SIZE}x{SIZE}, severity 3).\n")
    names = args.only or corruptions.names(temporal=False)  # temporal ones corrupt clips, not images
    cpu_table(names, batch, repeats=1 if args.quick else 5)


if __name__ == "__main__":
    main()
