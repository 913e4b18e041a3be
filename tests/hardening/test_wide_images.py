"""A very wide or tall image is bounded before it is resampled (issue 36, item 10): a 104-byte 6000x1 PNG
used to take 1.3 GB in `_decode` (scaled whole by its 1-pixel side)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.data import _decode

PEAK = """
import resource, sys
from pathlib import Path
from domainbench.data import _decode
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = _decode(Path(sys.argv[1]), 224)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(out.shape, (after - before) // 1024)
"""


@pytest.mark.parametrize("w, h", [(6000, 1), (1, 6000), (20000, 3)])
def test_a_very_wide_image_decodes_without_a_large_allocation(tmp_path: Path, w: int, h: int) -> None:
    path = tmp_path / "wide.png"
    Image.new("RGB", (w, h), (10, 20, 30)).save(path)
    out = _decode(path, 32)
    assert out.shape == (32, 32, 3) and (out == np.array([10, 20, 30], np.uint8)).all()
    proc = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=120)
    shape, grown_mb = proc.stdout.rsplit(")", 1)
    assert shape + ")" == "(224, 224, 3)", proc.stderr
    assert int(grown_mb) < 100  # MB of peak memory the decode added (1,300 before the bound)


def test_ordinary_shapes_decode_as_before(tmp_path: Path) -> None:
    """Below the bound the resize-then-crop path is unchanged: bit for bit the same as PIL's own."""
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(30, 90, 3), dtype=np.uint8)  # 3:1, inside the bound
    Image.fromarray(arr).save(tmp_path / "a.png")
    im = Image.fromarray(arr).resize((48, 16), Image.Resampling.BICUBIC)
    expected = np.asarray(im.crop((16, 0, 32, 16)))
    np.testing.assert_array_equal(_decode(tmp_path / "a.png", 16), expected)
