"""Typed configuration: the domain config (what the planner chose) and the run config.

Both live on disk as TOML and round-trip exactly: ``load(dump(cfg)) == cfg``.
The domain file lists its corruptions as an array of tables::

    domain = "dash-cam footage at night"

    [[corruptions]]
    name = "motion_blur"
    severities = [1, 2, 3]
    reason = "the car moves during the exposure"

    [corruptions.params]      # optional: explicit parameters instead of the ladder
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.errors import UserInputError, first_validation_error

SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorruptionChoice(_Strict):
    """One corruption the planner chose, with the severities to evaluate and why."""

    name: str
    severities: list[int] = Field(default_factory=lambda: [1, 2, 3, 4, 5])
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""

    @field_validator("severities")
    @classmethod
    def _severities_in_ladder(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("severities must list at least one level in 1..5")
        bad = [s for s in v if not 1 <= s <= 5]
        if bad:
            raise ValueError(f"severities must be integers in 1..5, got {bad}")
        return sorted(set(v))


class PlannerProvenance(_Strict):
    """How a plan was made, so a stored plan can be audited and reproduced."""

    provider: str = "manual"
    model: str = ""
    prompt_version: str = ""
    samples: int = 1
    temperature: float = 0.0
    # selection frequency of every catalogue entry over the samples (the paper's heatmap)
    frequencies: dict[str, float] = Field(default_factory=dict)
    violations: list[str] = Field(default_factory=list)
    created_at: str = ""


class DomainConfig(_Strict):
    schema_version: int = SCHEMA_VERSION
    domain: str
    corruptions: list[CorruptionChoice]
    planner: PlannerProvenance = Field(default_factory=PlannerProvenance)

    @field_validator("corruptions")
    @classmethod
    def _unique_names(cls, v: list[CorruptionChoice]) -> list[CorruptionChoice]:
        names = [c.name for c in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"corruption listed twice: {', '.join(dupes)}")
        return v

    def check_catalogue(self) -> None:
        """Raise UserInputError if a corruption or its parameters are not in the catalogue."""
        import corruptions

        for c in self.corruptions:
            try:
                corruptions.get(c.name)  # raises with close-name suggestions
                if c.params:
                    corruptions.validate_params(c.name, c.params)
            except corruptions.CorruptionError as e:
                raise UserInputError(str(e)) from e


class RunConfig(_Strict):
    schema_version: int = SCHEMA_VERSION
    dataset: str = "sample"
    # class names for zero-shot prediction; needed for an unlabeled folder, optional otherwise
    classes: list[str] | None = None
    # file images are resized (shorter side) and centre-cropped to this size
    image_size: int = 224
    models: list[str] = Field(default_factory=lambda: ["embedded:fmnist-plain", "embedded:fmnist-augmented"])
    baseline: str | None = None
    seed: int = 0
    batch_size: int = 128
    device: str = "auto"
    limit: int | None = None
    templates: list[str] | None = None
    # images per unit of work; None picks a size that keeps one corrupted shard near 32 MB
    shard_size: int | None = None
    # worker processes that corrupt images; None: one per core beyond the first two
    workers: int | None = None
    stability: bool = True
    stability_points: int = 5
    # images per shard whose embeddings are measured for stability (clean + m perturbed)
    stability_images: int = 64
    threat: bool = True
    threat_anchors: int = 50

    @field_validator("templates")
    @classmethod
    def _templates_have_a_slot(cls, v: list[str] | None) -> list[str] | None:
        bad = [t for t in v or [] if t.count("{}") != 1]
        if bad:
            raise ValueError(f"each prompt template needs exactly one {{}} for the class name, got {bad}")
        return v

    @property
    def baseline_model(self) -> str:
        return self.baseline or self.models[0]


def _drop_none(obj: Any) -> Any:
    # TOML has no null; None fields (and empty tables, whose default is empty) are left out
    # and come back as their defaults.
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None and v != {}}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


_INT_ARRAY = re.compile(r"\[\n((?:[ \t]+-?\d+,\n)+)\]")


def dumps(cfg: BaseModel) -> str:
    text = tomli_w.dumps(_drop_none(cfg.model_dump(mode="json")))
    # tomli_w puts every array element on its own line; severities read better as [1, 2, 3]
    return _INT_ARRAY.sub(lambda m: "[" + ", ".join(v.strip().rstrip(",") for v in m.group(1).splitlines()) + "]", text)


def save(cfg: BaseModel, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(dumps(cfg))
    tmp.replace(path)
    return path


def _load(path: str | Path, model: type[BaseModel]) -> Any:
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"config file {path} does not exist; create one with `domainbench plan \"...\" -o {path}`")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UserInputError(f"config file {path} is not valid TOML ({e}); fix the syntax and retry") from e
    try:
        return model.model_validate(data)
    except ValidationError as e:
        loc, msg = first_validation_error(e)
        raise UserInputError(f"config file {path}: {loc}: {msg}; fix that field and retry") from e


def load_domain(path: str | Path, check: bool = True) -> DomainConfig:
    cfg: DomainConfig = _load(path, DomainConfig)
    if check:
        try:
            cfg.check_catalogue()
        except UserInputError as e:
            raise UserInputError(f"config file {path}: {e}") from e
    return cfg


def load_run(path: str | Path) -> RunConfig:
    return _load(path, RunConfig)


Device = Literal["auto", "cpu", "cuda"]
