"""Dataset loaders: the bundled sample, ImageFolder, CSV manifest, unlabeled folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.data import load_sample, open_dataset
from domainbench.errors import UserInputError


def _img(path: Path, value: int, size: tuple[int, int] = (30, 20)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(path)


def test_sample_is_balanced_and_subset_interleaves_classes() -> None:
    ds = load_sample()
    assert len(ds) == 1000 and len(ds.classes) == 10 and ds.arrays.shape == (1000, 28, 28)  # type: ignore[union-attr]
    assert np.bincount(ds.labels).tolist() == [100] * 10  # type: ignore[arg-type]
    sub = ds.subset(25)
    counts = np.bincount(sub.labels, minlength=10)  # type: ignore[arg-type]
    assert counts.min() == 2 and counts.max() == 3  # every class is seen by a smoke run
    np.testing.assert_array_equal(sub.arrays, ds.arrays[np.sort(np.flatnonzero(np.isin(np.arange(1000), _idx(ds, sub))))])  # type: ignore[index]
    with pytest.raises(UserInputError, match="positive"):
        ds.subset(0)


def _idx(ds, sub) -> np.ndarray:  # type: ignore[no-untyped-def]
    # recover the subset's indices by matching images (all sample images are distinct)
    flat = {ds.arrays[i].tobytes(): i for i in range(len(ds))}
    return np.array([flat[im.tobytes()] for im in sub.arrays])


def test_image_folder_resizes_and_crops_to_one_size(tmp_path: Path) -> None:
    _img(tmp_path / "ds" / "red_car" / "a.png", 10, (40, 20))
    _img(tmp_path / "ds" / "red_car" / "b.jpg", 20, (20, 40))
    _img(tmp_path / "ds" / "truck" / "c.png", 30)
    (tmp_path / "ds" / "truck" / "notes.txt").write_text("ignored")
    ds = open_dataset(str(tmp_path / "ds"), image_size=16)
    assert ds.classes == ["red car", "truck"] and ds.labels.tolist() == [0, 0, 1]  # type: ignore[union-attr]
    b = ds.load(np.arange(3))
    assert b.images.shape == (3, 16, 16, 3) and b.images.dtype == np.uint8
    assert b.images[2].min() == b.images[2].max() == 30
    ds2 = open_dataset(str(tmp_path / "ds"), classes=["a red car", "a truck"])
    assert ds2.classes == ["a red car", "a truck"]
    with pytest.raises(UserInputError, match="3 classes but"):
        open_dataset(str(tmp_path / "ds"), classes=["a", "b", "c"])


def test_image_folder_with_an_empty_class_is_an_error(tmp_path: Path) -> None:
    _img(tmp_path / "ds" / "cat" / "a.png", 1)
    (tmp_path / "ds" / "dog").mkdir()
    with pytest.raises(UserInputError, match="dog hold no images"):
        open_dataset(str(tmp_path / "ds"))


def test_manifest_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    _img(tmp_path / "imgs" / "1.png", 5)
    _img(tmp_path / "imgs" / "2.png", 6)
    (tmp_path / "m.csv").write_text("path,label\nimgs/1.png,dog\nimgs/2.png,cat\n")
    ds = open_dataset(str(tmp_path / "m.csv"), image_size=8)
    assert ds.classes == ["cat", "dog"] and ds.labels.tolist() == [1, 0]  # type: ignore[union-attr]
    # a class with no images is allowed in an explicit list: balanced accuracy skips it
    ds = open_dataset(str(tmp_path / "m.csv"), classes=["dog", "cat", "bird"])
    assert ds.labels.tolist() == [0, 1]  # type: ignore[union-attr]
    with pytest.raises(UserInputError, match=r"label\(s\) \['cat'\] are not in the class list"):
        open_dataset(str(tmp_path / "m.csv"), classes=["dog", "bird"])
    (tmp_path / "bad.csv").write_text("file,class\nx,y\n")
    with pytest.raises(UserInputError, match="path,label"):
        open_dataset(str(tmp_path / "bad.csv"))


def test_unlabeled_folder_needs_class_names(tmp_path: Path) -> None:
    _img(tmp_path / "u" / "1.png", 1)
    with pytest.raises(UserInputError, match="--classes"):
        open_dataset(str(tmp_path / "u"))
    ds = open_dataset(str(tmp_path / "u"), classes=["x", "y"])
    assert ds.labels is None and not ds.labelled and len(ds) == 1


@pytest.mark.parametrize("kind", ["missing", "empty", "not_csv"])
def test_bad_dataset_paths_name_the_input(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x"
    if kind == "empty":
        path.mkdir()
    elif kind == "not_csv":
        path = tmp_path / "x.json"
        path.write_text("{}")
    with pytest.raises(UserInputError, match=str(path)):
        open_dataset(str(path))


def test_unreadable_images_are_reported_not_fatal(tmp_path: Path) -> None:
    _img(tmp_path / "ds" / "a" / "ok.png", 1)
    (tmp_path / "ds" / "a" / "broken.png").write_bytes(b"\x89PNG broken")
    _img(tmp_path / "ds" / "b" / "ok.png", 2)
    ds = open_dataset(str(tmp_path / "ds"), image_size=8)
    b = ds.load(np.arange(len(ds)))
    assert len(b.images) == 2 and b.labels.tolist() == [0, 1]  # type: ignore[union-attr]
    assert [Path(p).name for _, p, _ in b.unreadable] == ["broken.png"]
    assert b.indices.tolist() == [1, 2]


def test_dataset_kinds_are_asked_in_precedence_and_can_be_named(tmp_path: Path) -> None:
    from domainbench.data import list_dataset_kinds

    assert list_dataset_kinds() == ["image_folder", "manifest", "sample", "unlabeled_folder"]
    # a folder with class folders *and* loose images is an ImageFolder: class folders take precedence
    _img(tmp_path / "ds" / "cat" / "a.png", 10)
    _img(tmp_path / "ds" / "loose.png", 20)
    ds = open_dataset(str(tmp_path / "ds"))
    assert ds.labelled and ds.classes == ["cat"] and len(ds) == 1
    # naming the kind skips detection: the same folder read as unlabeled images
    unlabeled = open_dataset(str(tmp_path / "ds"), classes=["cat", "dog"], kind="unlabeled_folder")
    assert not unlabeled.labelled and len(unlabeled) == 1 and unlabeled.paths[0].name == "loose.png"  # type: ignore[index]
