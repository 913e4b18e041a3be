"""A folder of the user's own shifted images, opened against the run's clean dataset.

Two layouts, told apart by what the folder holds:

- **class folders** named after the dataset's classes (any subset of them; ``_`` reads as a space,
  as for a dataset folder): the images are labelled, every metric applies;
- **image files** directly in the folder: unlabelled, each paired with the clean image of the same
  relative file name, so the label-free metrics (flips against the paired clean image) apply.

Pairing: a shifted file pairs with the clean file of the same relative path, extension left out
(``night/cat/001.jpg`` pairs with ``data/cat/001.png``). The bundled sample has no files: an image
named by an integer (``42.png``, ``00042.png``, also inside class folders) pairs with the sample's
image of that index (0-based, in the full sample, also under ``--limit``). Class folders whose
every file pairs with a clean image are paired as well (labelled *and* flips), also when ``--limit`` left
some of those clean images out of the run (they are then classified with the shift, for its flips only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from domainbench.data import IMAGE_EXTENSIONS, Dataset, _decode, _images_in
from domainbench.data.decoding import display_name
from domainbench.errors import UserInputError


@dataclass
class ShiftImages:
    """One ``[[shift]]`` folder, ready to load in shards like a dataset."""

    name: str
    root: Path
    #: the shifted images (their labels index the clean dataset's classes; None: unlabelled)
    images: Dataset
    #: per shifted image, the index of its paired clean image in the run's dataset (in ``source`` where set);
    #: None: not paired
    partner: np.ndarray | None
    #: what the run should be told (images left out, pairing not possible)
    notes: list[str] = field(default_factory=list)
    #: the dataset ``partner`` indexes when it is not the run's: the whole dataset, for class folders whose files
    #: name images --limit did not evaluate (each then gets its clean prediction when the shift is scored); the
    #: shift's units are then indexed by position in the folder, as an unpaired shift's
    source: Dataset | None = None

    @property
    def labelled(self) -> bool:
        return self.images.labels is not None

    @property
    def paired(self) -> bool:
        return self.partner is not None

    def unit_indices(self) -> np.ndarray:
        """Per shifted image, the index its units store: the paired clean image's index in the run's dataset, or
        (not paired, or paired with images --limit left out) its position in the folder."""
        if self.partner is None or self.source is not None:
            return np.arange(len(self.images))
        return self.partner


def _fix(name: str) -> str:
    # the folder comes from a plan's [[shift]] table or from --shift: this module cannot tell which, so both
    return (f"set the path of the plan's [[shift]] table with name = \"{name}\" (or of --shift {name}=PATH) to a "
            "folder of class folders named like the dataset's classes, or of images named like the dataset's files")


def open_shift(name: str, path: str | Path, clean: Dataset, clean_spec: str, limit: int | None = None) -> ShiftImages:
    """The shift folder ``path`` against the run's clean dataset (``clean_spec``: its path or ``sample``).

    Raises ``UserInputError`` (naming the folder and the fix) for a missing folder, a folder of no
    decodable image, class folders that are not the dataset's classes, or unlabelled files that pair
    with no clean image.
    """
    root = Path(path).expanduser()
    where = f"shift {name!r} folder {display_name(str(root))}"
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise UserInputError(f"{where} {what}; {_fix(name)}")
    keys = _clean_keys(clean, clean_spec)
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    notes: list[str] = []
    source: Dataset | None = None
    if class_dirs:
        by_name = {c: i for i, c in enumerate(clean.classes)}
        folder_class = {d: _class_of(d.name, by_name) for d in class_dirs}
        unknown = [display_name(d.name) for d, c in folder_class.items() if c is None]
        if unknown:
            raise UserInputError(f"{where}: class folder(s) {', '.join(unknown)} are not among the dataset's classes "
                                 f"({', '.join(clean.classes)}); rename or remove them")
        paths, labels = [], []
        for d in class_dirs:
            imgs = _images_in(d)
            paths += imgs
            labels += [folder_class[d]] * len(imgs)
        images = Dataset(f"shift:{name}", list(clean.classes), np.array(labels, dtype=np.int64), paths=paths,
                         image_size=clean.image_size).subset(limit)
        assert images.paths is not None
        partners = [keys.get(_key(p, root, clean)) for p in images.paths]
        partner = np.array(partners, dtype=np.int64) if partners and all(p is not None for p in partners) else None
        if partner is None and clean.whole is not None:
            # files named like the dataset's images that --limit did not evaluate (the first 40 sample images under
            # --limit 40: its class-interleaved subset leaves 16 of them out) pair with the whole dataset's images
            whole_keys = _clean_keys(clean.whole, clean_spec)
            wider = [whole_keys.get(_key(p, root, clean.whole)) for p in images.paths]
            if wider and all(p is not None for p in wider):
                partners, partner, source = wider, np.array(wider, dtype=np.int64), clean.whole
        if partner is not None:
            _paired_once(list(zip(images.paths, partners, strict=True)), root, where)
        if partner is None and any(p is not None for p in partners):
            notes.append(f"{where}: only {sum(p is not None for p in partners)} of {len(partners)} images are named like "
                         "an evaluated clean image, so none is paired (no flips); name them all like the dataset's files "
                         "to pair them")
    else:
        files = _images_in(root)
        if not files:
            raise UserInputError(f"{where} holds no images ({', '.join(sorted(IMAGE_EXTENSIONS))}); {_fix(name)}")
        pairs = [(p, keys.get(_key(p, root, clean))) for p in files]
        kept = [(p, i) for p, i in pairs if i is not None]
        _paired_once(kept, root, where)
        if not kept:
            example = clean.paths[0].name if clean.paths else "0.png"
            raise UserInputError(f"{where}: none of its {len(files)} images is named like an evaluated image of the "
                                 f"dataset (e.g. {display_name(example)}), and it has no class folders; name the files "
                                 "like the dataset's, or sort them into class folders")
        if len(kept) < len(files):
            notes.append(f"{where}: {len(files) - len(kept)} of {len(files)} images pair with no evaluated clean image "
                         "and are left out")
        images = Dataset(f"shift:{name}", list(clean.classes), None, paths=[p for p, _ in kept],
                         image_size=clean.image_size)
        partner = np.array([i for _, i in kept], dtype=np.int64)
    assert images.paths is not None
    if not images.paths:
        raise UserInputError(f"{where}: its class folders hold no images; {_fix(name)}")
    _one_decodes(images.paths, where, name)
    return ShiftImages(name, Path(os.path.abspath(root)), images, partner, notes, source)


def _paired_once(pairs: list[tuple[Path, int | None]], root: Path, where: str) -> None:
    """Refuse two shifted files that pair with one clean image (``5.png`` and ``005.png``, ``6.png`` and ``6.bmp``):
    scoring both would count that image twice (its flips too)."""
    seen: dict[int, Path] = {}
    for p, i in pairs:
        if i is None:
            continue
        if i in seen:
            a, b = (display_name(q.relative_to(root).as_posix()) for q in (seen[i], p))
            raise UserInputError(f"{where}: {a} and {b} both pair with the same clean image; keep one of them "
                                 "(each clean image pairs with one shifted file)")
        seen[i] = p


def _class_of(folder: str, by_name: dict[str, int]) -> int | None:
    shown = display_name(folder)
    for candidate in (shown, shown.replace("_", " ")):
        if candidate in by_name:
            return by_name[candidate]
    return None


def _key(path: Path, root: Path, clean: Dataset) -> str | None:
    """The pairing key of a shifted file: its relative path without extension, or its index for in-memory images."""
    if clean.paths is None:
        stem = path.stem
        return str(int(stem)) if stem.isascii() and stem.isdigit() else None  # "².png" is a digit, not a number
    return path.relative_to(root).with_suffix("").as_posix()


def _clean_keys(clean: Dataset, spec: str) -> dict[str, int]:
    """Pairing key -> index in ``clean`` of every evaluated clean image."""
    if clean.paths is None:
        origin = np.arange(len(clean)) if clean.origin is None else clean.origin
        return {str(int(o)): i for i, o in enumerate(origin)}
    base = Path(spec).expanduser()
    base = Path(os.path.abspath(base if base.is_dir() else base.parent))
    keys = {}
    for i, p in enumerate(clean.paths):
        try:
            keys[Path(os.path.abspath(p)).relative_to(base).with_suffix("").as_posix()] = i
        except ValueError:  # a manifest row outside its folder: it cannot be named relative to it
            continue
    return keys


def _one_decodes(paths: list[Path], where: str, name: str) -> None:
    reasons = set()
    for p in paths:
        try:
            _decode(p, 8)
            return
        except Exception as e:  # noqa: BLE001 - any decoder failure counts as unreadable
            reasons.add(type(e).__name__)
    raise UserInputError(f"{where}: none of its {len(paths)} image files can be decoded ({', '.join(sorted(reasons))}); "
                         f"{_fix(name)}")
