from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from domainbench import corruptions
from domainbench.corruptions.gallery import GAP, LABEL_HEIGHT, write_gallery


def test_gallery_writes_one_sheet_per_corruption(tmp_path, photo):
    img = photo(24, 32)
    paths = write_gallery(img, tmp_path / "g", names=["fog", "horizontal_flip"], seed=3)
    assert [p.name for p in paths] == ["fog.png", "horizontal_flip.png"]
    sheet = np.asarray(Image.open(paths[1]))
    assert sheet.shape == (24 + LABEL_HEIGHT, 6 * 32 + 5 * GAP, 3)
    np.testing.assert_array_equal(sheet[LABEL_HEIGHT:, :32], img)
    np.testing.assert_array_equal(sheet[LABEL_HEIGHT:, 32 + GAP : 64 + GAP], img[:, ::-1])
    fog = np.asarray(Image.open(paths[0]))
    x5 = 5 * (32 + GAP)
    np.testing.assert_array_equal(fog[LABEL_HEIGHT:, x5 : x5 + 32], corruptions.corrupt(img, "fog", severity=5, seed=3))


def test_gallery_grey_image_and_unknown_name(tmp_path, photo):
    grey = np.ascontiguousarray(photo(20, 20)[..., 0])
    (path,) = write_gallery(grey, tmp_path, names=["gaussian_blur"])
    assert np.asarray(Image.open(path)).shape == (20 + LABEL_HEIGHT, 6 * 20 + 5 * GAP, 3)
    with pytest.raises(corruptions.CorruptionError, match="did you mean"):
        write_gallery(grey, tmp_path, names=["fgo"])
