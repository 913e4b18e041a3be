"""Task manifests: the user's own questions (VQA) and captions (retrieval) about their own images.

A VQA manifest (``.jsonl`` or ``.csv``) has one row per question:

- ``image``        path of the image, relative to the manifest's folder (absolute paths work too)
- ``question``     the question asked about it
- ``answers``      optional reference answers (a JSON list in a CSV cell; a plain cell is one answer)
- ``choices``      optional options of a multiple-choice question (a JSON list in a CSV cell)
- ``answer_type``  optional ``yes/no``, ``number`` or ``other``

Several rows may name one image: the image is decoded and corrupted once, and ``--limit`` keeps or drops
all of its questions together. A retrieval manifest has one row per image: ``image`` and ``captions`` (one
or more strings; a JSON list in a CSV cell, a plain cell being one caption).

Every row is checked before anything runs; the first bad row raises one :class:`UserInputError` naming the
manifest, the row (JSONL: its line; CSV: its record number, the header being record 1) and the fix.
A manifest is fingerprinted like a folder dataset (its images) plus the hash of its own bytes, so a resume
refuses a changed question as it refuses a changed image.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from domainbench.data.decoding import display_name
from domainbench.data.fingerprint import DatasetFingerprint, dataset_fingerprint
from domainbench.errors import UserInputError, first_validation_error

AnswerType = Literal["yes/no", "number", "other"]
ANSWER_TYPES: tuple[str, ...] = ("yes/no", "number", "other")
MANIFEST_SUFFIXES = (".jsonl", ".csv")
#: the seed of ``--limit``'s sample of images when the caller names none (the run's seed in a run)
DEFAULT_LIMIT_SEED = 0


def _string_list(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise ValueError(f"`{field}` must be a list of strings, got {type(value).__name__}; write it as "
                         f'["first", "second"]')
    bad = [(i, v) for i, v in enumerate(value) if not isinstance(v, str)]
    if bad:
        i, v = bad[0]
        raise ValueError(f"`{field}` must hold strings only, item {i} is {type(v).__name__} {v!r}; quote it "
                         f'(e.g. ["{v}"])')
    return list(value)


def _key(text: str) -> str:
    """How a reference is matched against the choices here: case and surrounding spaces ignored (scoring
    normalises both sides fully; this check only has to catch a reference that no option could match)."""
    return " ".join(text.split()).casefold()


class VQARow(BaseModel):
    """One question of a VQA manifest, as written (paths resolved later)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str
    question: str
    answers: tuple[str, ...] | None = None
    choices: tuple[str, ...] | None = None
    answer_type: AnswerType | None = None

    @field_validator("image", "question", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string")
        return v.strip()

    @field_validator("answers", "choices", mode="before")
    @classmethod
    def _lists(cls, v: Any, info: Any) -> Any:
        if v is None:
            return None
        out = _string_list(v, info.field_name)
        if not out:
            raise ValueError(f"`{info.field_name}` is an empty list; leave it out or give at least one")
        return tuple(out)

    @field_validator("answer_type", mode="before")
    @classmethod
    def _answer_type(cls, v: Any) -> Any:
        if v is None or v == "":
            return None
        if v not in ANSWER_TYPES:
            raise ValueError(f"answer_type {v!r} is not one of {', '.join(ANSWER_TYPES)}; use one of them or leave "
                             "it empty")
        return v

    @model_validator(mode="after")
    def _references_among_choices(self) -> VQARow:
        if self.choices and self.answers:
            options = {_key(c) for c in self.choices}
            outside = [a for a in self.answers if _key(a) not in options]
            if outside:
                raise ValueError(f"reference answer(s) {outside[:3]} are not among the choices {list(self.choices)}; "
                                 "add them to `choices` or fix `answers`")
        if self.choices is not None and len({_key(c) for c in self.choices}) < 2:
            raise ValueError("`choices` needs at least two different options; add options or drop `choices`")
        return self


class RetrievalRow(BaseModel):
    """One image of a retrieval manifest and its captions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str
    captions: tuple[str, ...]

    @field_validator("image", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        if not isinstance(v, str) or not v.strip():
            raise ValueError("must be a non-empty string")
        return v.strip()

    @field_validator("captions", mode="before")
    @classmethod
    def _captions(cls, v: Any) -> Any:
        out = [c.strip() for c in _string_list(v, "captions")]
        if not out or not all(out):
            raise ValueError("`captions` needs one or more non-empty captions")
        return tuple(out)


class ManifestFingerprint(BaseModel):
    """A task manifest's identity: its images (as a folder dataset's) and its own bytes (the questions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Literal["vqa", "retrieval"]
    images: DatasetFingerprint
    manifest_sha256: str
    rows: int  # questions (VQA) or images (retrieval) evaluated, after --limit

    def describe(self) -> str:
        return f"{self.task} manifest {self.manifest_sha256[:12]} ({self.rows} rows) over {self.images.describe()}"

    def differences(self, other: ManifestFingerprint) -> str:
        """What differs, in words ("" when the content is the same)."""
        what = [w for w, a, b in (("task", self.task, other.task), ("manifest rows", self.manifest_sha256,
                                                                       other.manifest_sha256),
                                  ("row count", self.rows, other.rows)) if a != b]
        images = self.images.differences(other.images)
        return ", ".join(what + ([f"images ({images})"] if images else []))


def _limit_images(n_images: int, limit: int | None, seed: int) -> np.ndarray | None:
    """Sorted indices of a seeded random sample of ``limit`` images (None: keep them all)."""
    if limit is None or limit >= n_images:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise UserInputError(f"--limit must be a positive number of images, got {limit}")
    # a random sample, not the first N: manifests are often sorted by source or class
    return np.sort(np.random.default_rng(seed).choice(n_images, size=int(limit), replace=False))


@dataclass(frozen=True)
class VQAManifest:
    """The questions of a VQA manifest; ``image_of[q]`` is the index into ``images`` of question q's image."""

    path: Path
    images: list[Path]
    rows: list[VQARow]
    image_of: np.ndarray
    line_of: list[int]  # the row's line (JSONL) or record (CSV) in the file, for messages and exports
    manifest_sha256: str
    #: each kept image's index in the whole manifest's image list (None: the manifest is whole)
    origin: np.ndarray | None = None

    @property
    def task(self) -> str:
        return "vqa"

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def has_references(self) -> bool:
        return any(r.answers for r in self.rows)

    def open_questions(self) -> list[int]:
        """Rows that are neither yes/no nor multiple choice (a contrastive model cannot answer them)."""
        return [i for i, r in enumerate(self.rows) if not r.choices and not is_yes_no(r)]

    def subset(self, limit: int | None, seed: int = DEFAULT_LIMIT_SEED) -> VQAManifest:
        """A seeded random sample of ``limit`` images with every question of each chosen image."""
        keep = _limit_images(len(self.images), limit, seed)
        if keep is None:
            return self
        new_index = np.full(len(self.images), -1, dtype=np.int64)
        new_index[keep] = np.arange(keep.size)
        rows_kept = np.flatnonzero(new_index[self.image_of] >= 0)
        origin = keep if self.origin is None else self.origin[keep]
        return VQAManifest(self.path, [self.images[i] for i in keep], [self.rows[i] for i in rows_kept],
                           new_index[self.image_of[rows_kept]], [self.line_of[i] for i in rows_kept],
                           self.manifest_sha256, origin)

    def fingerprint(self) -> ManifestFingerprint:
        return ManifestFingerprint(task="vqa", images=dataset_fingerprint(_Files(self.images)),
                                   manifest_sha256=self.manifest_sha256, rows=len(self.rows))


@dataclass(frozen=True)
class RetrievalManifest:
    """Images and their captions; ``caption_image[t]`` is the image of caption t (captions in row order)."""

    path: Path
    images: list[Path]
    rows: list[RetrievalRow]
    line_of: list[int]
    manifest_sha256: str
    origin: np.ndarray | None = None

    @property
    def task(self) -> str:
        return "retrieval"

    def __len__(self) -> int:
        return len(self.images)

    @property
    def captions(self) -> list[str]:
        return [c for r in self.rows for c in r.captions]

    @property
    def caption_image(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.rows)), [len(r.captions) for r in self.rows]).astype(np.int64)

    def subset(self, limit: int | None, seed: int = DEFAULT_LIMIT_SEED) -> RetrievalManifest:
        keep = _limit_images(len(self.images), limit, seed)
        if keep is None:
            return self
        origin = keep if self.origin is None else self.origin[keep]
        return RetrievalManifest(self.path, [self.images[i] for i in keep], [self.rows[i] for i in keep],
                                 [self.line_of[i] for i in keep], self.manifest_sha256, origin)

    def fingerprint(self) -> ManifestFingerprint:
        return ManifestFingerprint(task="retrieval", images=dataset_fingerprint(_Files(self.images)),
                                   manifest_sha256=self.manifest_sha256, rows=len(self.rows))


@dataclass(frozen=True)
class _Files:
    """What ``dataset_fingerprint`` reads of a folder dataset: its file paths."""

    paths: list[Path]

    def __len__(self) -> int:
        return len(self.paths)


YES_NO = ("yes", "no")


def is_yes_no(row: VQARow) -> bool:
    """A yes/no question: so declared, or every reference answer is yes or no."""
    if row.answer_type == "yes/no":
        return True
    if row.answer_type is None and row.answers and not row.choices:
        return all(_key(a).rstrip(".!") in YES_NO for a in row.answers)
    return False


# -- reading ---------------------------------------------------------------------------------------------


def _text_of(path: Path) -> tuple[bytes, str]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserInputError(f"manifest {display_name(str(path))} cannot be read ({type(e).__name__}); check the "
                             "path and its permissions") from None
    try:
        return raw, raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserInputError(f"manifest {display_name(str(path))} is not UTF-8 text (byte offset {e.start}: "
                             f"{raw[e.start:e.start + 1]!r}); save it as UTF-8 and retry") from None


def _csv_cell(value: str | None, field: str, where: str) -> Any:
    """A CSV cell as the JSON-ish value a row model takes: lists as JSON, empty cells as absent."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if field in ("answers", "choices", "captions") and text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise UserInputError(f"{where}: `{field}` {display_name(text[:60])} is not a JSON list ({e.msg}); write it "
                                 'as ["first", "second"] with double quotes (doubled inside a CSV cell)') from None
    return text


def _records(path: Path, text: str, columns: tuple[str, ...], required: tuple[str, ...]) -> list[tuple[int, Any]]:
    """(row number, raw record) of each non-blank row of a JSONL or CSV manifest."""
    name = display_name(str(path))
    out: list[tuple[int, Any]] = []
    if path.suffix.lower() == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserInputError(f"manifest {name} line {number} is not JSON ({e.msg}); write one JSON object "
                                     "per line") from None
            if not isinstance(record, dict):
                raise UserInputError(f"manifest {name} line {number} is a JSON {type(record).__name__}, not an object; "
                                     f"write one object per line with keys {', '.join(columns)}")
            out.append((number, record))
        return out
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in required if c not in header]
    if missing:
        raise UserInputError(f"manifest {name} needs a header row with column(s) {', '.join(missing)} (got "
                             f"{', '.join(header) or 'none'}); columns are {', '.join(columns)}")
    unknown = [h for h in header if h not in columns]
    if unknown:
        raise UserInputError(f"manifest {name}: unknown column(s) {', '.join(unknown)}; columns are {', '.join(columns)}")
    reader.fieldnames = header
    for number, record in enumerate(reader, start=2):
        if None in record:  # more cells than the header names
            raise UserInputError(f"manifest {name} record {number} has more cells than the header; quote cells that "
                                 "hold commas")
        if not any((v or "").strip() for v in record.values()):
            continue
        where = f"manifest {name} record {number}"
        cells = {k: _csv_cell(v, k, where) for k, v in record.items()}
        out.append((number, {k: v for k, v in cells.items() if v is not None}))
    return out


def _row_error(path: Path, number: int, e: ValidationError, suffix: str, fields: tuple[str, ...]) -> UserInputError:
    loc, msg = first_validation_error(e)
    where = f"manifest {display_name(str(path))} {'line' if suffix == '.jsonl' else 'record'} {number}"
    kind = e.errors()[0]["type"]
    if kind == "missing":
        return UserInputError(f"{where} has no `{loc}`; give every row {' and '.join(f'`{f}`' for f in fields[:2])}")
    if kind == "extra_forbidden":
        return UserInputError(f"{where}: unknown field `{loc}`; fields are {', '.join(fields)}")
    return UserInputError(f"{where}: {loc + ': ' if loc else ''}{msg}")


def _check_suffix(path: Path, what: str) -> None:
    if path.suffix.lower() not in MANIFEST_SUFFIXES:
        raise UserInputError(f"{what} manifest {display_name(str(path))} must be a .jsonl or .csv file")
    if not path.is_file():
        raise UserInputError(f"{what} manifest {display_name(str(path))} does not exist; give the path of a .jsonl "
                             "or .csv file")


def _resolve(path: Path, image: str, number: int, unit: str) -> Path:
    p = Path(image).expanduser()
    full = p if p.is_absolute() else path.parent / p
    if not full.is_file():
        raise UserInputError(f"manifest {display_name(str(path))} {unit} {number}: image {display_name(image)} does "
                             f"not exist (looked for {display_name(str(full))}); fix the path, relative to the "
                             "manifest's folder")
    return Path(os.path.abspath(full))


def load_vqa_manifest(path: str | Path) -> VQAManifest:
    """Read and check a VQA manifest (see the module docstring); errors name the row and the fix."""
    path = Path(path).expanduser()
    _check_suffix(path, "VQA")
    raw, text = _text_of(path)
    unit = "line" if path.suffix.lower() == ".jsonl" else "record"
    records = _records(path, text, tuple(VQARow.model_fields), ("image", "question"))
    if not records:
        raise UserInputError(f"manifest {display_name(str(path))} lists no questions; add rows with image and question")
    rows: list[VQARow] = []
    lines: list[int] = []
    images: list[Path] = []
    index: dict[Path, int] = {}
    image_of: list[int] = []
    for number, record in records:
        try:
            row = VQARow.model_validate(record)
        except ValidationError as e:
            raise _row_error(path, number, e, path.suffix.lower(), tuple(VQARow.model_fields)) from None
        full = _resolve(path, row.image, number, unit)
        if full not in index:
            index[full] = len(images)
            images.append(full)
        rows.append(row)
        lines.append(number)
        image_of.append(index[full])
    return VQAManifest(path, images, rows, np.array(image_of, dtype=np.int64), lines, hashlib.sha256(raw).hexdigest())


def load_retrieval_manifest(path: str | Path) -> RetrievalManifest:
    """Read and check a retrieval manifest: one row per image with its captions."""
    path = Path(path).expanduser()
    _check_suffix(path, "retrieval")
    raw, text = _text_of(path)
    unit = "line" if path.suffix.lower() == ".jsonl" else "record"
    records = _records(path, text, ("image", "captions"), ("image", "captions"))
    if not records:
        raise UserInputError(f"manifest {display_name(str(path))} lists no images; add rows with image and captions")
    rows: list[RetrievalRow] = []
    lines: list[int] = []
    images: list[Path] = []
    seen: dict[Path, int] = {}
    for number, record in records:
        try:
            row = RetrievalRow.model_validate(record)
        except ValidationError as e:
            raise _row_error(path, number, e, path.suffix.lower(), ("image", "captions")) from None
        full = _resolve(path, row.image, number, unit)
        if full in seen:
            raise UserInputError(f"manifest {display_name(str(path))} {unit} {number}: image {display_name(row.image)} "
                                 f"is already listed in {unit} {seen[full]}; put all of an image's captions in one row")
        seen[full] = number
        rows.append(row)
        lines.append(number)
        images.append(full)
    return RetrievalManifest(path, images, rows, lines, hashlib.sha256(raw).hexdigest())


__all__ = [
    "ANSWER_TYPES",
    "ManifestFingerprint",
    "RetrievalManifest",
    "RetrievalRow",
    "VQAManifest",
    "VQARow",
    "is_yes_no",
    "load_retrieval_manifest",
    "load_vqa_manifest",
]
