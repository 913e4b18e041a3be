"""Datasets: the bundled sample, an ImageFolder tree, a CSV manifest, an unlabeled folder.

``open_dataset(spec)`` asks the registered dataset kinds in order of precedence which one
claims ``spec``; the built-in kinds, first to last:

- ``sample``             ``sample``: the bundled Fashion-MNIST subset (1,000 images, 10 classes)
- ``manifest``           ``PATH.csv`` with columns ``path,label`` (paths relative to the file)
- ``image_folder``       ``PATH/`` with class subfolders (ImageFolder: one folder per class)
- ``unlabeled_folder``   ``PATH/`` of image files: needs class names (``classes=[...]``)

Plug-ins add kinds through the entry-point group ``domainbench.datasets`` (an entry point
names a ``DatasetKind``, or a module calling ``register_dataset_kind`` on import).

File images are decoded to RGB and brought to one size (shorter side resized to
``image_size``, then centre-cropped) so a shard is one array: corruptions then see the
same pixels whatever the model, and models apply their own preprocessing afterwards.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from domainbench.corruptions.named_registry import Registry
from domainbench.data.decoding import display_name
from domainbench.errors import UserInputError

if TYPE_CHECKING:
    from PIL import Image

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
SAMPLE_PATH = Path(__file__).parent / "sample" / "fashion_mnist_sample.npz"


def class_rounds(labels: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """All indices in rounds over the classes: round r holds the r-th image of every class that still has one,
    so any prefix is as even a share of the classes as their sizes allow. Without ``rng``, images in storage
    order and classes by label (``Dataset.subset``); with it, both drawn (a seeded stratified sample)."""
    rank = np.empty(labels.size, dtype=np.int64)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rank[idx] = np.arange(idx.size) if rng is None else rng.permutation(idx.size)
    turn = labels if rng is None else rng.permutation(int(labels.max()) + 1)[labels]
    return np.lexsort((turn, rank))


@dataclass
class Batch:
    images: np.ndarray  # uint8 (k, H, W) or (k, H, W, 3)
    indices: np.ndarray  # dataset indices of the images that decoded
    labels: np.ndarray | None
    unreadable: list[tuple[int, str, str]] = field(default_factory=list)  # (index, path, reason)


@dataclass
class Dataset:
    name: str
    classes: list[str]
    labels: np.ndarray | None
    arrays: np.ndarray | None = None  # in-memory images (the bundled sample)
    paths: list[Path] | None = None
    image_size: int = 224
    #: each image's index in the dataset it was taken from (``subset``); None: the images are the whole dataset
    origin: np.ndarray | None = None
    #: the whole dataset ``subset`` took these images from (None: this is it); a real-shift folder pairs its files
    #: with its images, also those --limit left out (``data.shift_folder``)
    whole: Dataset | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        # a subset sent to a worker process does not drag the whole dataset along (a shift that pairs with it holds
        # it itself: ``ShiftImages.source``)
        return {**self.__dict__, "whole": None}

    def __len__(self) -> int:
        return len(self.arrays) if self.arrays is not None else len(self.paths or [])

    @property
    def labelled(self) -> bool:
        return self.labels is not None

    def subset(self, limit: int | None) -> Dataset:
        """The first ``limit`` images in a class-interleaved order, so a smoke run sees every class."""
        if limit is None or limit >= len(self):
            return self
        if limit < 1:
            raise UserInputError(f"--limit must be a positive number of images, got {limit}")
        order = np.arange(len(self)) if self.labels is None else class_rounds(self.labels)
        keep = np.sort(order[:limit])
        return Dataset(
            name=f"{self.name}[:{limit}]",
            classes=self.classes,
            labels=None if self.labels is None else self.labels[keep],
            arrays=None if self.arrays is None else self.arrays[keep],
            paths=None if self.paths is None else [self.paths[i] for i in keep],
            image_size=self.image_size,
            origin=(np.arange(len(self)) if self.origin is None else self.origin)[keep],
            whole=self.whole if self.whole is not None else self,
        )

    def load(self, indices: np.ndarray) -> Batch:
        indices = np.asarray(indices, dtype=np.int64)
        labels = None if self.labels is None else self.labels[indices]
        if self.arrays is not None:
            return Batch(self.arrays[indices], indices, labels)
        assert self.paths is not None
        paths = [self.paths[i] for i in indices]
        return files_batch(decode_files(paths, self.image_size), paths, indices, labels, self.image_size)


def decode_files(paths: list[Path], size: int) -> list[np.ndarray | str]:
    """Each file decoded to (size, size, 3) uint8, or the reason it does not decode.

    The one decode of file images: ``Dataset.load`` calls it in-process, the engine's input
    pipeline on chunks of a shard in worker processes (``domainbench.engine.input_pipeline``).
    """
    out: list[np.ndarray | str] = []
    for path in paths:
        try:
            out.append(_decode(path, size))
        except Exception as e:  # noqa: BLE001 - any decoder failure is reported, never fatal
            out.append(display_name(f"{type(e).__name__}: {e}"))
    return out


def files_batch(decoded: list[np.ndarray | str], paths: list[Path], indices: np.ndarray, labels: np.ndarray | None,
                size: int) -> Batch:
    """The batch of dataset ``indices`` (files ``paths``) from their ``decode_files`` results, in order."""
    ok = np.array([not isinstance(d, str) for d in decoded], dtype=bool)
    bad = [(int(i), display_name(str(p)), d) for i, p, d in zip(indices, paths, decoded) if isinstance(d, str)]
    imgs = [d for d in decoded if not isinstance(d, str)]
    images = np.stack(imgs) if imgs else np.zeros((0, size, size, 3), np.uint8)
    return Batch(images, indices[ok], None if labels is None else labels[ok], bad)


#: an image whose short-side scaling would exceed this many times size² pixels is cropped before it is resampled
MAX_RESIZE_AREA = 16


def _decode(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    from domainbench.data.decoding import to_rgb

    with Image.open(path) as im:
        return square_image(to_rgb(im), size)


def square_image(im: Image.Image, size: int) -> np.ndarray:
    """An RGB PIL image as a ``size`` x ``size`` uint8 array: scaled by its short side, centre-cropped (every
    dataset kind's frames and images go through this one resize, so a clip's frame equals the same still)."""
    from PIL import Image

    w, h = im.size
    scale = size / min(w, h)
    resized = (max(size, round(w * scale)), max(size, round(h * scale)))
    if resized[0] * resized[1] > MAX_RESIZE_AREA * size * size:
        # a very wide or tall image (6000x1 would be 1.3 GB scaled whole by its short side): only
        # the centre square that the crop keeps is resampled, straight to size x size
        side = min(w, h)
        left, top = (w - side) / 2, (h - side) / 2
        return np.asarray(im.resize((size, size), Image.Resampling.BICUBIC,
                                    box=(left, top, left + side, top + side)), dtype=np.uint8)
    im = im.resize(resized, Image.Resampling.BICUBIC)
    w, h = im.size
    left, top = (w - size) // 2, (h - size) // 2
    return np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8)


def load_sample() -> Dataset:
    if not SAMPLE_PATH.is_file():
        raise UserInputError(
            f"the bundled sample {SAMPLE_PATH} is missing; reinstall domainbench or run "
            "`python backend/data/sample/make_sample.py`"
        )
    with np.load(SAMPLE_PATH, allow_pickle=False) as z:
        return Dataset(
            name="sample",
            classes=[str(c) for c in z["classes"]],
            labels=z["labels"].astype(np.int64),
            arrays=z["images"],
            image_size=int(z["images"].shape[1]),
        )


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


def _load_image_folder(root: Path, image_size: int) -> Dataset:
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    paths: list[Path] = []
    labels: list[int] = []
    for c, d in enumerate(class_dirs):
        imgs = _images_in(d)
        paths += imgs
        labels += [c] * len(imgs)
    empty = [display_name(d.name) for d in class_dirs if not _images_in(d)]
    if not paths:
        raise UserInputError(f"dataset folder {root} has class folders but no images ({', '.join(IMAGE_EXTENSIONS)}); add images")
    if empty:
        raise UserInputError(
            f"dataset folder {root}: class folder(s) {', '.join(empty)} hold no images; add images or remove the folder(s)"
        )
    classes = [display_name(d.name).replace("_", " ") for d in class_dirs]
    return Dataset(root.name, classes, np.array(labels, dtype=np.int64), paths=paths, image_size=image_size)


def _load_manifest(path: Path, image_size: int, classes: list[str] | None) -> Dataset:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserInputError(f"manifest {path} is not UTF-8 text (byte offset {e.start}: {raw[e.start:e.start + 1]!r}); "
                             "save it as UTF-8 and retry") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames or not {"path", "label"} <= set(reader.fieldnames):
        raise UserInputError(f"manifest {path} needs a header row with columns path,label (got {reader.fieldnames})")
    rows = list(reader)
    if not rows:
        raise UserInputError(f"manifest {path} lists no images; add rows `path,label`")
    names = classes or sorted({r["label"] for r in rows})
    index = {c: i for i, c in enumerate(names)}
    unknown = sorted({r["label"] for r in rows} - set(index))
    if unknown:
        raise UserInputError(
            f"manifest {path}: label(s) {unknown[:5]} are not in the class list {names}; add them to --classes or fix the rows"
        )
    paths = [(path.parent / r["path"]).resolve() for r in rows]
    labels = np.array([index[r["label"]] for r in rows], dtype=np.int64)
    return Dataset(path.stem, names, labels, paths=paths, image_size=image_size)


def _load_sample(spec: str, classes: list[str] | None, image_size: int) -> Dataset:
    ds = load_sample()
    if classes and classes != ds.classes:
        raise UserInputError(f"the bundled sample has fixed classes {ds.classes}; drop --classes")
    return ds


def _path(spec: str) -> Path:
    return Path(spec).expanduser()


def _is_manifest(spec: str) -> bool:
    path = _path(spec)
    return path.is_file() and path.suffix.lower() == ".csv"


def _has_class_folders(spec: str) -> bool:
    path = _path(spec)
    return path.is_dir() and any(p.is_dir() and not p.name.startswith(".") for p in path.iterdir())


def _has_images(spec: str) -> bool:
    path = _path(spec)
    return path.is_dir() and bool(_images_in(path))


def _load_class_folders(spec: str, classes: list[str] | None, image_size: int) -> Dataset:
    path = _path(spec)
    ds = _load_image_folder(path, image_size)
    if classes:
        if len(classes) != len(ds.classes):
            raise UserInputError(
                f"--classes names {len(classes)} classes but {path} has {len(ds.classes)} class folders {ds.classes}"
            )
        ds.classes = list(classes)
    return ds


def _load_unlabeled(spec: str, classes: list[str] | None, image_size: int) -> Dataset:
    path = _path(spec)
    if not classes:
        raise UserInputError(
            f"dataset folder {path} has images but no class folders (unlabeled): pass the candidate class "
            "names with --classes a,b,c so zero-shot prediction has something to choose from"
        )
    return Dataset(path.name, list(classes), None, paths=_images_in(path), image_size=image_size)


@dataclass(frozen=True)
class DatasetKind:
    """One way to open a dataset: whether it claims a spec, and how to load what it claims.

    ``load(spec, classes, image_size)`` returns a ``Dataset``; kinds are asked in increasing
    ``precedence`` (ties by name), so a more specific kind takes a lower number. ``named_specs``
    are specs that are names rather than paths (``sample``): a mistyped one gets a suggestion.
    """

    description: str
    claims: Callable[[str], bool]
    load: Callable[[str, list[str] | None, int], Dataset]
    precedence: int = 100
    named_specs: tuple[str, ...] = ()


class UnknownDatasetError(UserInputError):
    """A dataset kind name that is not registered (or a dataset kind clash or a broken plug-in)."""


DATASET_KINDS: Registry[DatasetKind] = Registry(
    "dataset kind", error=UnknownDatasetError, group="domainbench.datasets", entry_type=DatasetKind
)

for _name, _kind in {
    "sample": DatasetKind("the bundled Fashion-MNIST sample", lambda spec: spec == "sample", _load_sample, 0, ("sample",)),
    "manifest": DatasetKind("a CSV manifest with columns path,label", _is_manifest, lambda s, c, n: _load_manifest(_path(s), n, c), 10),
    "image_folder": DatasetKind("a folder with one sub-folder of images per class", _has_class_folders, _load_class_folders, 20),
    "unlabeled_folder": DatasetKind("a folder of unlabeled images (needs --classes)", _has_images, _load_unlabeled, 30),
}.items():
    DATASET_KINDS.register(_name, _kind, origin="built-in")


def register_dataset_kind(name: str, kind: DatasetKind, *, replace: bool = False) -> DatasetKind:
    """Add a dataset kind; a name already taken raises unless ``replace=True``."""
    return DATASET_KINDS.register(name, kind, replace=replace)


def list_dataset_kinds(pattern: str = "*") -> list[str]:
    """Registered dataset kind names matching a shell wildcard."""
    return DATASET_KINDS.names(pattern)


def _some_image_decodes(ds: Dataset, spec: str) -> Dataset:
    """``ds``, once one of its files decodes (usually the first tried); a dataset of none is refused.

    Single unreadable files are reported and skipped by the run; a dataset with no readable file
    at all is a wrong folder (or every file damaged) and would only produce an empty run.
    """
    if ds.paths is None:
        return ds
    reasons = []
    for path in ds.paths:
        try:
            _decode(path, 8)
            return ds
        except Exception as e:  # noqa: BLE001 - any decoder failure counts as unreadable
            reasons.append(f"{type(e).__name__}")
    why = ", ".join(sorted(set(reasons)))
    raise UserInputError(f"dataset {display_name(spec)}: none of its {len(ds.paths)} image files can be decoded ({why}); "
                         "check that it is the right folder and that the files are images")


def open_dataset(spec: str, classes: list[str] | None = None, image_size: int = 224, kind: str | None = None) -> Dataset:
    """Open a dataset by spec (see the module docstring); errors name the input and the fix.

    ``kind`` skips detection and opens ``spec`` as that registered kind.
    """
    if kind is not None:
        return _some_image_decodes(DATASET_KINDS.get(kind).load(spec, classes, image_size), spec)
    for _, k in sorted(DATASET_KINDS.items(), key=lambda item: (item[1].precedence, item[0])):
        if k.claims(spec):
            return _some_image_decodes(k.load(spec, classes, image_size), spec)
    # no kind claims it: say what is wrong with it
    path = _path(spec)
    if not path.exists():
        named = [n for _, k in DATASET_KINDS.items() for n in k.named_specs]
        close = DATASET_KINDS.close_matches(spec, named, cutoff=0.6)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UserInputError(
            f"dataset path {path} does not exist; give a folder of class folders, a CSV manifest, "
            f"an image folder, or `sample`{hint}"
        )
    if path.is_file():
        raise UserInputError(f"dataset file {path} is not a .csv manifest; give a manifest with columns path,label or a folder")
    if not path.is_dir():  # a FIFO, socket or device: reading it could block or never end
        raise UserInputError(f"dataset {path} is not a folder or a file (a FIFO, socket or device); give a folder of "
                             "class folders, a CSV manifest or an image folder")
    raise UserInputError(f"dataset folder {path} is empty: put images in it (or one folder per class)")
