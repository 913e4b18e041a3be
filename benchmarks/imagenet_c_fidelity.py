"""Fidelity of domainbench's ImageNet-C corruptions to the reference ``imagecorruptions`` 1.1.2.

Runs the 19 corruptions of ``imagecorruptions`` (15 ImageNet-C + 4 extra) at severities 1..5 on
natural 224x224 photos with both libraries and prints, for every one of the 95 cells, the mean
SSIM and PSNR of each against the clean image, the differences, and the time per image of each.
A cell is within tolerance when |dSSIM| <= 0.05 and |dPSNR| <= 1.5 dB; a corruption is too slow
when ours takes more than 2x the reference's time per image.

The reference runs in its own virtual environment (created on first use, default
``~/.cache/domainbench/imagenet-c-venv``): ``imagecorruptions==1.1.2`` with ``setuptools<81``,
``numpy<2`` and ``scikit-image==0.20.0``. That scikit-image's ``gaussian`` has no
``multichannel`` argument, which the reference's glass_blur and gaussian_blur pass: the worker
maps it to ``channel_axis=-1`` by patching the reference module's ``gaussian`` in its own process.

    python benchmarks/imagenet_c_fidelity.py [--quick] [--only NAME ...] [--venv PATH] [--check] [--json OUT]
        [--write-test-data]   # refresh tests/corruptions/data/imagenet_c_reference.json

This file is also the worker the reference process runs (``--worker``); it imports nothing from
domainbench at module level, only numpy and cv2 (both environments have them).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

IMAGENET_C = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)
SEVERITIES = (1, 2, 3, 4, 5)
SSIM_TOL = 0.05
PSNR_TOL = 1.5
SPEED_TOL = 2.0
SIZE = 224
#: photos shipped with scikit-image (read in the reference environment) and scikit-learn
SKIMAGE_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "motorcycle")
#: corruptions whose statistics vary much from draw to draw (frost: one of five photographs of very
#: different brightness; spatter: a few rare, bright drops; fog and snow: one random field per image)
#: run this many times per image, with
#: different seeds, so that the comparison measures the corruption rather than the draws
REPEATS = {"frost": 10, "spatter": 6, "fog": 4, "snow": 3}
REFERENCE_PINS = ("imagecorruptions==1.1.2", "setuptools<81", "numpy<2", "scikit-image==0.20.0")
DEFAULT_VENV = Path.home() / ".cache" / "domainbench" / "imagenet-c-venv"
TEST_DATA = Path(__file__).resolve().parent.parent / "tests" / "corruptions" / "data"


# ---------------------------------------------------------------- metrics (shared by both sides)


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM (Wang et al. 2004: Gaussian window sigma 1.5, K1 0.01, K2 0.03, range 255) over channels."""
    x = a.astype(np.float64)
    y = b.astype(np.float64)
    if x.ndim == 2:
        x, y = x[..., None], y[..., None]
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    vals = []
    for ch in range(x.shape[-1]):
        u, v = x[..., ch], y[..., ch]
        blur = lambda z: cv2.GaussianBlur(z, (11, 11), 1.5, borderType=cv2.BORDER_REFLECT)  # noqa: E731
        mu_u, mu_v = blur(u), blur(v)
        uu = blur(u * u) - mu_u**2
        vv = blur(v * v) - mu_v**2
        uv = blur(u * v) - mu_u * mu_v
        num = (2 * mu_u * mu_v + c1) * (2 * uv + c2)
        den = (mu_u**2 + mu_v**2 + c1) * (uu + vv + c2)
        vals.append(float(np.mean(num / den)))
    return float(np.mean(vals))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB against the 255 range; capped at 100 dB for identical images."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 100.0 if mse <= 1e-10 else float(10 * np.log10(255.0**2 / mse))


def square_crop(img: np.ndarray, size: int = SIZE) -> np.ndarray:
    """Centre square crop resized to size x size (INTER_AREA), RGB uint8."""
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = img[..., :3]
    h, w = img.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    crop = np.ascontiguousarray(img[top : top + s, left : left + s])
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA).astype(np.uint8)


def cell_seed(seed: int, name: str, severity: int, index: int) -> int:
    return (seed * 1_000_003 + IMAGENET_C.index(name) * 1009 + severity * 101 + index) % (2**31 - 1)


# ---------------------------------------------------------------- the reference side (its venv)


def _reference_worker(in_path: str, out_path: str, names: list[str], seed: int, photos: list[str]) -> None:
    """Run imagecorruptions on the images of ``in_path`` (plus scikit-image photos); write metrics and times."""
    import warnings

    warnings.filterwarnings("ignore")
    import imagecorruptions.corruptions as icc
    from imagecorruptions import corrupt

    original = icc.gaussian

    def gaussian(*args, multichannel=None, **kwargs):  # the reference passes multichannel=True
        if multichannel:
            kwargs.setdefault("channel_axis", -1)
        return original(*args, **kwargs)

    icc.gaussian = gaussian

    import skimage.data

    load = {"motorcycle": lambda: skimage.data.stereo_motorcycle()[0]}
    extra = [square_crop(load.get(p, getattr(skimage.data, p, None))()) for p in photos]
    given = list(np.load(in_path)["images"]) if os.path.getsize(in_path) else []
    images = [square_crop(im) for im in given] + extra
    result = {"images": [], "cells": {}}
    for name in names:
        corrupt(images[0], severity=1, corruption_name=name)  # warm-up (imports, caches), not timed
        for sev in SEVERITIES:
            rows = []
            for r in range(REPEATS.get(name, 1)):
                for i, img in enumerate(images):
                    np.random.seed(cell_seed(seed + r, name, sev, i))
                    t0 = time.perf_counter()
                    out = corrupt(img, severity=sev, corruption_name=name)
                    dt = time.perf_counter() - t0
                    rows.append((ssim(img, out), psnr(img, out), dt))
            result["cells"][f"{name}/{sev}"] = rows
    np.savez_compressed(out_path + ".npz", images=np.stack(images))
    Path(out_path).write_text(json.dumps(result))


def ensure_reference_venv(venv: Path) -> Path:
    """The reference environment's python, creating the venv and installing the pinned reference if missing."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import imagecorruptions, skimage, cv2; assert skimage.__version__ == '0.20.0'"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"creating the reference environment in {venv} ...", file=sys.stderr)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REFERENCE_PINS], check=True)
    subprocess.run(probe, check=True)
    return python


def run_reference(python: Path, images: list[np.ndarray], names: list[str], seed: int, photos: list[str]):
    """(all images the reference used, {cell: [(ssim, psnr, seconds), ...]})."""
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.npz")
        if images:
            np.savez(inp, images=np.stack(images))
        else:
            Path(inp).write_bytes(b"")
        out = os.path.join(tmp, "out.json")
        cmd = [str(python), os.path.abspath(__file__), "--worker", inp, out, "--seed", str(seed),
               "--photos", ",".join(photos), "--only", *names]
        env = {**os.environ, "PYTHONPATH": ""}
        subprocess.run(cmd, check=True, env=env)
        data = json.loads(Path(out).read_text())
        used = list(np.load(out + ".npz")["images"])
    return used, data["cells"]


# ---------------------------------------------------------------- our side


def frost_sources() -> list[str]:
    """The frost textures this environment can run: the procedural one always, the photographs where installed."""
    from domainbench.corruptions.kernels import frost_photos

    with_frost_texture(None)
    return ["imagenet-c", "procedural"] if frost_photos.photo_folder() is not None else ["procedural"]


def with_frost_texture(source: str | None) -> None:
    """Point frost at one texture source (None: whatever is installed) for the rest of this process."""
    from domainbench.corruptions.kernels import frost_photos

    if source == "procedural":
        os.environ[frost_photos.ENV] = "procedural"
    else:
        os.environ.pop(frost_photos.ENV, None)
    frost_photos._folder_for.cache_clear()


def run_ours(images: list[np.ndarray], names: list[str], seed: int):
    from domainbench import corruptions
    cells = {}
    for name in names:
        corruptions.corrupt(images[0], name, severity=1, seed=0)  # warm-up (registry, caches), not timed
        for sev in SEVERITIES:
            rows = []
            for r in range(REPEATS.get(name, 1)):
                for i, img in enumerate(images):
                    s = cell_seed(seed + r, name, sev, i)
                    t0 = time.perf_counter()
                    out = corruptions.corrupt(img, name, severity=sev, seed=s)
                    dt = time.perf_counter() - t0
                    rows.append((ssim(img, out), psnr(img, out), dt))
            cells[f"{name}/{sev}"] = rows
    return cells


def sklearn_photos() -> list[np.ndarray]:
    from sklearn.datasets import load_sample_image

    return [square_crop(load_sample_image(n)) for n in ("china.jpg", "flower.jpg")]


def compare(ref: dict, ours: dict, names: list[str]) -> tuple[list[dict], dict[str, float]]:
    rows = []
    speed = {}
    for name in names:
        t_ref = t_ours = 0.0
        for sev in SEVERITIES:
            key = f"{name}/{sev}"
            r = np.array(ref[key], dtype=np.float64)
            o = np.array(ours[key], dtype=np.float64)
            row = {
                "corruption": name, "severity": sev,
                "ssim_ref": float(r[:, 0].mean()), "ssim_ours": float(o[:, 0].mean()),
                "psnr_ref": float(r[:, 1].mean()), "psnr_ours": float(o[:, 1].mean()),
                "ms_ref": 1000 * float(r[:, 2].mean()), "ms_ours": 1000 * float(o[:, 2].mean()),
            }
            row["d_ssim"] = row["ssim_ours"] - row["ssim_ref"]
            row["d_psnr"] = row["psnr_ours"] - row["psnr_ref"]
            row["ok"] = abs(row["d_ssim"]) <= SSIM_TOL and abs(row["d_psnr"]) <= PSNR_TOL
            rows.append(row)
            t_ref += row["ms_ref"]
            t_ours += row["ms_ours"]
        speed[name] = t_ours / max(t_ref, 1e-9)
    return rows, speed


def print_table(rows: list[dict], speed: dict[str, float], n_images: int) -> None:
    print(f"ImageNet-C fidelity on {n_images} natural {SIZE}x{SIZE} photos "
          f"(tolerance: |dSSIM| <= {SSIM_TOL}, |dPSNR| <= {PSNR_TOL} dB; speed <= {SPEED_TOL}x the reference)")
    head = f"{'corruption':<18} {'sev':>3} {'SSIM ref':>8} {'ours':>6} {'dSSIM':>7} {'PSNR ref':>8} {'ours':>6} {'dPSNR':>6} {'ms ref':>8} {'ms ours':>8}  ok"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['corruption']:<18} {r['severity']:>3} {r['ssim_ref']:8.3f} {r['ssim_ours']:6.3f} {r['d_ssim']:+7.3f} "
              f"{r['psnr_ref']:8.2f} {r['psnr_ours']:6.2f} {r['d_psnr']:+6.2f} {r['ms_ref']:8.2f} {r['ms_ours']:8.2f}  "
              f"{'yes' if r['ok'] else 'NO'}")
    n_ok = sum(r["ok"] for r in rows)
    print(f"\ncells within tolerance: {n_ok}/{len(rows)}")
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"  outside: {r['corruption']}/{r['severity']}  dSSIM {r['d_ssim']:+.3f}  dPSNR {r['d_psnr']:+.2f}")
    print("\ntime per image, ours / reference:")
    for name, ratio in speed.items():
        flag = "  TOO SLOW" if ratio > SPEED_TOL else ""
        print(f"  {name:<18} {ratio:6.2f}x{flag}")
    logs = [np.log(v) for v in speed.values() if v > 0]
    if logs:
        print(f"  geometric mean     {float(np.exp(np.mean(logs))):6.2f}x")


def write_test_data(images: list[np.ndarray], ref: dict, names: list[str], out_dir: Path) -> None:
    """Reference SSIM/PSNR per cell for the given images (the test suite's data) and the images themselves."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(images):
        cv2.imwrite(str(out_dir / f"imagenet_c_photo{i}.png"), img[..., ::-1])
    out_json = out_dir / "imagenet_c_reference.json"
    cells = json.loads(out_json.read_text())["cells"] if out_json.exists() else {}  # --only refreshes some
    cells.update({k: [[round(v[0], 4), round(v[1], 3)] for v in rows] for k, rows in ref.items() if k.split("/")[0] in names})
    doc = {
        "about": "imagecorruptions 1.1.2 statistics (SSIM, PSNR against clean) per image and cell; "
                 "written by benchmarks/imagenet_c_fidelity.py --write-test-data",
        "images": [f"imagenet_c_photo{i}.png" for i in range(len(images))],
        "seeds": "cell_seed(0, name, severity, image index) with np.random.seed",
        "cells": cells,
    }
    out_json.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 photos instead of 7")
    ap.add_argument("--only", nargs="+", default=None, help="corruptions to run (ImageNet-C names)")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the reference environment (created if missing)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--photos", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--write-test-data", action="store_true", help="store the reference statistics of 2 photos for the tests")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a cell or a speed ratio is outside its tolerance")
    args = ap.parse_args(argv)
    names = list(args.only or IMAGENET_C)
    unknown = sorted(set(names) - set(IMAGENET_C))
    if unknown:
        ap.error(f"not ImageNet-C names: {unknown}")
    if args.worker:
        photos = [p for p in (args.photos or "").split(",") if p]
        _reference_worker(args.worker[0], args.worker[1], names, args.seed, photos)
        return 0

    python = ensure_reference_venv(args.venv)
    if args.write_test_data:
        images, ref = run_reference(python, [], names, args.seed, ["chelsea", "coffee"])
        write_test_data(images, ref, names, TEST_DATA)
        print(f"wrote {TEST_DATA / 'imagenet_c_reference.json'}")
        return 0
    photos = list(SKIMAGE_PHOTOS[:2] if args.quick else SKIMAGE_PHOTOS)
    given = sklearn_photos()[: 1 if args.quick else 2]
    images, ref = run_reference(python, given, names, args.seed, photos)
    sources = frost_sources() if "frost" in names else ["installed"]
    with_frost_texture(sources[0])
    ours = run_ours(images, names, args.seed)
    rows, speed = compare(ref, ours, names)
    if "frost" in names:
        print(f"frost texture: {sources[0]}" + ("" if len(sources) > 1 else
              " (the reference's photographs are not installed: pip install --no-deps imagecorruptions==1.1.2)"))
    print_table(rows, speed, len(images))
    report = {"rows": rows, "speed": speed, "frost_texture": sources[0]}
    for other in sources[1:]:
        # the other texture source: frost's cells only, and the gap that falling back to it costs
        with_frost_texture(other)
        frost_rows, frost_speed = compare(ref, run_ours(images, ["frost"], args.seed), ["frost"])
        print(f"\nfrost with the {other} texture:")
        for r in frost_rows:
            print(f"  frost/{r['severity']}  SSIM {r['ssim_ours']:.3f} (ref {r['ssim_ref']:.3f}, {r['d_ssim']:+.3f})  "
                  f"PSNR {r['psnr_ours']:.2f} (ref {r['psnr_ref']:.2f}, {r['d_psnr']:+.2f} dB)  {'yes' if r['ok'] else 'NO'}")
        print(f"  cells within tolerance: {sum(r['ok'] for r in frost_rows)}/5; time ours / reference {frost_speed['frost']:.2f}x")
        report[f"frost_{other}"] = frost_rows
    with_frost_texture(None)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    ok = all(r["ok"] for r in rows) and all(v <= SPEED_TOL for v in speed.values())
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
