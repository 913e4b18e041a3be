"""The reference's ladders below 224 px, for the corruptions whose parameters are lengths in pixels.

``imagecorruptions`` 1.1.2 defines its ladders on 224-pixel images and does not scale them. What a
scaled ladder should give at 32, 64 or 128 px is the reference's 224-pixel output shrunk to that
size (INTER_AREA). This measures, on the ladder test's photos (scikit-learn's two samples, centre
crops), the damage (1 - SSIM against the clean photo) per severity of

* the reference at 224 px, shrunk to each size (``shrunk``: what ours is held to),
* the reference run directly on the small image with its 224-pixel parameters (``native``: its own
  ladder at that size, for the record: glass_blur's falls from severity 3 to 4 at 32 and 128 px),
* ours at each size,

prints them and, with ``--write-test-data``, stores the reference's curves in
``tests/corruptions/data/imagenet_c_small_sizes.json`` for ``tests/corruptions/test_ladders_every_size.py``.
The reference runs in the environment of ``imagenet_c_fidelity.py`` (``--venv``).

    python benchmarks/imagenet_c_small_sizes.py [--only NAME ...] [--seeds N] [--write-test-data]
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
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from imagenet_c_fidelity import DEFAULT_VENV, TEST_DATA, ensure_reference_venv, ssim  # noqa: E402

SIZES = (32, 64, 128)
#: ImageNet-C corruptions whose parameters are pixel lengths (radius, displacement) scaled with the image
NAMES = ("defocus_blur", "glass_blur")
OUT = TEST_DATA / "imagenet_c_small_sizes.json"


def photos(size: int) -> list[np.ndarray]:
    """The ladder test's photos: centre squares of scikit-learn's two samples at ``size`` px."""
    from sklearn.datasets import load_sample_image

    out = []
    for which in ("china.jpg", "flower.jpg"):
        img = load_sample_image(which)
        h, w = img.shape[:2]
        m = min(h, w)
        crop = np.ascontiguousarray(img[(h - m) // 2 : (h - m) // 2 + m, (w - m) // 2 : (w - m) // 2 + m])
        out.append(cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA if size < m else cv2.INTER_CUBIC))
    return out


def shrink(img: np.ndarray, size: int) -> np.ndarray:
    return cv2.resize(img, (size, size), interpolation=cv2.INTER_AREA)


def _worker(in_path: str, out_path: str, names: list[str], seeds: int) -> None:
    """In the reference environment: the ``shrunk`` and ``native`` curves of each corruption."""
    import warnings

    warnings.filterwarnings("ignore")
    import imagecorruptions.corruptions as icc

    original = icc.gaussian

    def gaussian(*args, multichannel=None, **kwargs):  # the reference passes multichannel=True (see imagenet_c_fidelity)
        if multichannel:
            kwargs.setdefault("channel_axis", -1)
        return original(*args, **kwargs)

    icc.gaussian = gaussian
    given = np.load(in_path)

    def corrupt(fn, img: np.ndarray, severity: int, seed: int) -> np.ndarray:
        np.random.seed(seed)
        return np.uint8(np.clip(fn(img, severity), 0, 255))

    result: dict = {}
    for name in names:
        fn = getattr(icc, name)
        big = list(given["s224"])
        outs = {(k, r, s): corrupt(fn, b, s, 1000 * r + k) for k, b in enumerate(big) for r in range(seeds) for s in range(1, 6)}
        for size in SIZES:
            small = list(given[f"s{size}"])
            shrunk = [float(np.mean([1 - ssim(small[k], shrink(outs[k, r, s], size)) for k in range(len(big)) for r in range(seeds)]))
                      for s in range(1, 6)]
            native = [float(np.mean([1 - ssim(img, corrupt(fn, img, s, 1000 * r + k)) for k, img in enumerate(small) for r in range(seeds)]))
                      for s in range(1, 6)]
            result[f"{name}/{size}"] = {"shrunk": [round(v, 4) for v in shrunk], "native": [round(v, 4) for v in native]}
    Path(out_path).write_text(json.dumps(result))


def ours(name: str, size: int) -> list[float]:
    from domainbench import corruptions

    imgs = photos(size)
    return [float(np.mean([1 - ssim(img, corruptions.corrupt(img, name, severity=s, seed=k)) for k, img in enumerate(imgs)]))
            for s in range(1, 6)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=list(NAMES), choices=NAMES)
    ap.add_argument("--seeds", type=int, default=2, help="reference draws per photo and severity")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--write-test-data", action="store_true", help=f"store the reference's curves in {OUT}")
    ap.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker[0], args.worker[1], args.only, args.seeds)
        return 0
    python = ensure_reference_venv(args.venv)
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.json")
        np.savez(inp, **{f"s{s}": np.stack(photos(s)) for s in (*SIZES, 224)})
        cmd = [str(python), os.path.abspath(__file__), "--worker", inp, out, "--seeds", str(args.seeds), "--only", *args.only]
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)})
        ref = json.loads(Path(out).read_text())
    print("damage (1 - SSIM) by severity 1..5; reference at 224 shrunk / reference run at the size / ours")
    for key, curves in ref.items():
        name, size = key.split("/")
        mine = ours(name, int(size))
        gap = max(abs(a - b) for a, b in zip(mine, curves["shrunk"]))
        print(f"{name:<13} {size:>4} px  shrunk {np.round(curves['shrunk'], 3)}  native {np.round(curves['native'], 3)}  "
              f"ours {np.round(mine, 3)}  largest gap to shrunk {gap:.3f}")
    if args.write_test_data:
        doc = {"about": "imagecorruptions 1.1.2 damage (1 - SSIM) by severity on the ladder test's photos: 'shrunk' is "
                        "its 224 px output shrunk (INTER_AREA) to the size, 'native' its 224 px parameters run at the size; "
                        "written by benchmarks/imagenet_c_small_sizes.py --write-test-data",
               "seeds": f"np.random.seed(1000 * r + photo index), r < {args.seeds}", "curves": ref}
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
