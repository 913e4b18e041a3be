"""Throughput of every corruption at 224x224 on one CPU thread, against a plain albumentations loop.

For each corruption: images/s corrupting one image at a time (``corruptions.corrupt``), images/s
for batches of 32 (``corruptions.corrupt_batch``), and images/s of a per-image loop over
``A.Compose([<equivalent albumentations transform>])`` measured in the same run (``n/a`` where
albumentations has no equivalent). Ratios > 1 mean domainbench is faster. Any corruption slower
than 50 ms per image is flagged.

    python benchmarks/corruption_throughput.py [--quick] [--only NAME ...]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402

import albumentations as A  # noqa: E402
import cv2  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_sample_image  # noqa: E402

from domainbench import corruptions  # noqa: E402

SLOW_MS = 50.0
BATCH = 32


def albumentations_equivalents() -> dict[str, Callable[[], A.BasicTransform]]:
    """Severity-3-like albumentations transforms (p=1) for the corruptions that have one."""
    c = cv2
    return {
        "gaussian_noise": lambda: A.GaussNoise(std_range=(0.18, 0.18), p=1),
        "shot_noise": lambda: A.ShotNoise(scale_range=(0.1, 0.1), p=1),
        "impulse_noise": lambda: A.SaltAndPepper(amount=(0.09, 0.09), p=1),
        "salt_and_pepper": lambda: A.SaltAndPepper(amount=(0.05, 0.05), p=1),
        "speckle_noise": lambda: A.MultiplicativeNoise(multiplier=(0.65, 1.35), per_channel=True, elementwise=True, p=1),
        "gaussian_blur": lambda: A.GaussianBlur(blur_limit=0, sigma_limit=(3.0, 3.0), p=1),
        "defocus_blur": lambda: A.Defocus(radius=(6, 6), alias_blur=(0.5, 0.5), p=1),
        "glass_blur": lambda: A.GlassBlur(sigma=0.8, max_delta=2, iterations=2, p=1),
        "motion_blur": lambda: A.MotionBlur(blur_limit=(13, 13), p=1),
        "zoom_blur": lambda: A.ZoomBlur(max_factor=(1.21, 1.21), step_factor=(0.021, 0.021), p=1),
        "rotation": lambda: A.Rotate(limit=(15, 15), border_mode=c.BORDER_CONSTANT, p=1),
        "horizontal_flip": lambda: A.HorizontalFlip(p=1),
        "vertical_flip": lambda: A.VerticalFlip(p=1),
        "perspective": lambda: A.Perspective(scale=(0.09, 0.09), p=1),
        "grid_distortion": lambda: A.GridDistortion(distort_limit=(-0.3, 0.3), p=1),
        "elastic": lambda: A.ElasticTransform(alpha=30.0, sigma=10.0, p=1),
        "lens_distortion": lambda: A.OpticalDistortion(distort_limit=(0.18, 0.18), mode="camera", p=1),
        "jpeg_compression": lambda: A.ImageCompression(quality_range=(15, 15), p=1),
        "webp_compression": lambda: A.ImageCompression(compression_type="webp", quality_range=(10, 10), p=1),
        "pixelate": lambda: A.Downscale(scale_range=(0.25, 0.25), p=1),
        "posterize": lambda: A.Posterize(num_bits=3, p=1),
        "brightness": lambda: A.RandomBrightnessContrast(brightness_limit=(0.3, 0.3), contrast_limit=(0, 0), p=1),
        "contrast": lambda: A.RandomBrightnessContrast(brightness_limit=(0, 0), contrast_limit=(-0.8, -0.8), p=1),
        "saturate": lambda: A.ColorJitter(brightness=(1, 1), contrast=(1, 1), saturation=(3, 3), hue=(0, 0), p=1),
        "color_shift": lambda: A.RGBShift(r_shift_limit=40, g_shift_limit=40, b_shift_limit=40, p=1),
        "fog": lambda: A.RandomFog(fog_coef_range=(0.5, 0.5), p=1),
        "snow": lambda: A.RandomSnow(method="texture", p=1),
        "rain": lambda: A.RandomRain(p=1),
        "shadow": lambda: A.RandomShadow(p=1),
        "occluder": lambda: A.CoarseDropout(num_holes_range=(3, 3), hole_height_range=(0.2, 0.25),
                                            hole_width_range=(0.2, 0.25), p=1),
        "lens_spatter": lambda: A.Spatter(mode="mud", p=1),
        "iso_noise": lambda: A.ISONoise(color_shift=(0.03, 0.03), intensity=(0.3, 0.3), p=1),
        "chromatic_aberration": lambda: A.ChromaticAberration(primary_distortion_limit=(0.07, 0.07),
                                                              secondary_distortion_limit=(0, 0), p=1),
        "vignetting": lambda: A.Illumination(mode="corner", p=1),
    }


def rate(fn: Callable[[], object], items: int, budget_s: float) -> float:
    """Items per second: best of 3 rounds, each repeating ``fn`` for about budget_s / 3 seconds."""
    fn()  # warm-up (imports, caches)
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= budget_s / 3:
                break
        best = min(best, elapsed / n)
    return items / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (~0.1 s per measurement)")
    parser.add_argument("--only", nargs="*", help="corruption names to measure")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    warnings.filterwarnings("ignore")
    budget = 0.15 if args.quick else 1.0
    photos = [cv2.resize(load_sample_image(f), (224, 224), interpolation=cv2.INTER_AREA) for f in ("china.jpg", "flower.jpg")]
    image = photos[0]
    batch = np.stack([photos[i % 2] if i % 4 < 2 else photos[i % 2][:, ::-1] for i in range(BATCH)])
    refs = albumentations_equivalents()
    names = args.only or corruptions.names(temporal=False)  # temporal ones corrupt clips, not images

    header = f"{'corruption':<22}{'single img/s':>13}{'batch32 img/s':>14}{'albu img/s':>11}{'single/albu':>12}{'batch/albu':>11}{'ms/img':>8}"
    print(f"224x224 uint8 RGB, 1 thread, severity 3, {'quick' if args.quick else 'full'} run")
    print(header)
    print("-" * len(header))
    slow, ratios = [], []
    for name in names:
        single = rate(lambda: corruptions.corrupt(image, name, severity=3, seed=1), 1, budget)
        batched = rate(lambda: corruptions.corrupt_batch(batch, name, severity=3, seeds=1), BATCH, budget)
        albu_txt, r1, r2 = "n/a", "", ""
        if name in refs:
            try:
                pipe = A.Compose([refs[name]()], seed=1)
                albu = rate(lambda: pipe(image=image)["image"], 1, budget)
                albu_txt, r1, r2 = f"{albu:.0f}", f"{single / albu:.2f}x", f"{batched / albu:.2f}x"
                ratios.append((single / albu, batched / albu))
            except Exception as exc:  # report, do not hide, a reference that fails to build
                albu_txt = f"err:{type(exc).__name__}"
        ms = 1000.0 / min(single, batched)
        flag = "  SLOW" if ms > SLOW_MS else ""
        if flag:
            slow.append(name)
        print(f"{name:<22}{single:>13.0f}{batched:>14.0f}{albu_txt:>11}{r1:>12}{r2:>11}{1000.0 / single:>8.2f}{flag}")
    if ratios:
        g1 = float(np.exp(np.mean([np.log(a) for a, _ in ratios])))
        g2 = float(np.exp(np.mean([np.log(b) for _, b in ratios])))
        print(f"geometric mean over {len(ratios)} with an albumentations equivalent: single/albu {g1:.2f}x, batch/albu {g2:.2f}x")
    print(f"slower than {SLOW_MS:.0f} ms/image: {', '.join(slow) if slow else 'none'}")


if __name__ == "__main__":
    main()
