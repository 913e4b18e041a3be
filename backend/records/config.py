"""Typed configuration: the domain config (what the planner chose) and the run config.

Both live on disk as TOML and round-trip exactly: ``load(dump(cfg)) == cfg``.
The domain file lists its corruptions as an array of tables::

    domain = "dash-cam footage at night"

    [[corruptions]]
    name = "motion_blur"
    severities = [1, 2, 3]
    reason = "the car moves during the exposure"

    [corruptions.params]      # optional: explicit parameters instead of the ladder

    [[compositions]]          # optional (schema 2): corruptions stacked in one cell, applied in order
    name = "night rain"
    steps = [{corruption = "low_light", severity = 3}, {corruption = "rain", severity = 2}]
    reason = "night driving in rain: dark, wet windscreen"

    [[shift]]                 # optional (schema 3): the user's own shifted images, evaluated as cell shift:NAME
    name = "night"
    path = "photos/night"     # class folders named like the dataset's classes, or files named like its files
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StrictInt, ValidationError, ValidationInfo, field_validator, model_validator

from domainbench.runtime import resource_bounds as bounds
from domainbench.errors import UserInputError, first_validation_error

SCHEMA_VERSION = 1
#: domain files that hold ``[[compositions]]`` are version 2; every version-1 file still loads as it was
COMPOSITIONS_SCHEMA_VERSION = 2
#: a composed cell is stored and reported under this prefix + its name
COMPOSITION_PREFIX = "compose:"
#: domain files that hold ``[[shift]]`` are version 3 (they need a domainbench that evaluates real shifts)
SHIFTS_SCHEMA_VERSION = 3
#: a real-shift cell (the user's own images, ``domainbench.engine.shift_cells``) is stored under this prefix + its name
SHIFT_PREFIX = "shift:"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorruptionChoice(_Strict):
    """One corruption the planner chose, with the severities to evaluate and why."""

    name: str
    # strict: a string "3" or a float 3.0 is a typo to report, not a level to guess
    severities: list[StrictInt] = Field(default_factory=lambda: [1, 2, 3, 4, 5])
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    #: an image corruption on clips: one draw for the whole clip ("static") or a new one per frame
    #: ("independent", the default); left out of dumps while unset, so existing plans keep their ids
    mode: Literal["static", "independent"] | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("severities")
    @classmethod
    def _severities_in_ladder(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("severities must list at least one level in 1..5")
        bad = [s for s in v if not 1 <= s <= 5]
        if bad:
            raise ValueError(f"severities must be integers in 1..5, got {bad}")
        return sorted(set(v))


class CompositionStep(_Strict):
    corruption: str
    # strict: a severity written as the string "3" is refused, not coerced
    severity: int = Field(strict=True, ge=1, le=5)


class Composition(_Strict):
    """Corruptions that a domain produces together, applied in order to each image as one cell."""

    name: str = Field(min_length=1, max_length=80)
    steps: list[CompositionStep] = Field(min_length=1, max_length=5)
    reason: str = ""

    @property
    def cell_name(self) -> str:
        return COMPOSITION_PREFIX + self.name

    @property
    def pairs(self) -> list[tuple[str, int]]:
        return [(s.corruption, s.severity) for s in self.steps]


class RealShift(_Strict):
    """A folder of the user's own shifted images, evaluated beside the synthetic cells as ``shift:NAME``."""

    # a plain word: it is part of a cell name, a CLI argument and a file name in exports
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
    #: absolute once a run pins it (relative paths in a plan file are relative to the plan file)
    path: str = Field(min_length=1)

    @property
    def cell_name(self) -> str:
        return SHIFT_PREFIX + self.name


class PlannerProvenance(_Strict):
    """How a plan was made, so a stored plan can be audited and reproduced."""

    provider: str = "manual"
    model: str = ""
    prompt_version: str = ""
    samples: int = 1
    temperature: float = Field(default=0.0, allow_inf_nan=False)  # stored as JSON: nan/inf cannot be
    # selection frequency of every catalogue entry over the samples (the paper's heatmap)
    frequencies: dict[str, FiniteFloat] = Field(default_factory=dict)
    violations: list[str] = Field(default_factory=list)
    created_at: str = ""
    # audit fields, left out of a dump while empty so a plan made before them loads and hashes as before
    #: the domainbench version that made the plan (left out of the plan's id, as created_at is)
    planner_version: str = Field(default="", exclude_if=lambda v: not v)
    #: sha256 (first 16 hex digits) of each input the plan rests on: "text", "photos", "dataset"
    inputs: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    #: every LLM asked, as MODEL@HOST (no credentials)
    llms: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


class DomainConfig(_Strict):
    schema_version: int = SCHEMA_VERSION
    domain: str
    corruptions: list[CorruptionChoice]
    compositions: list[Composition] = Field(default_factory=list)
    # left out of a dump while empty: a plan without shifts is stored, and hashed to its id, as before
    shift: list[RealShift] = Field(default_factory=list, exclude_if=lambda v: not v)
    planner: PlannerProvenance = Field(default_factory=PlannerProvenance)

    @field_validator("corruptions")
    @classmethod
    def _unique_names(cls, v: list[CorruptionChoice]) -> list[CorruptionChoice]:
        names = [c.name for c in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"corruption listed twice: {', '.join(dupes)}")
        return v

    @field_validator("compositions")
    @classmethod
    def _compositions_named_once(cls, v: list[Composition]) -> list[Composition]:
        _listed_once([c.name for c in v], "composition")
        return v

    @field_validator("shift")
    @classmethod
    def _shifts_named_once(cls, v: list[RealShift]) -> list[RealShift]:
        _listed_once([s.name for s in v], "shift")
        return v

    @model_validator(mode="after")
    def _versioned_by_content(self) -> DomainConfig:
        # a plan without compositions stays version 1, byte for byte (and so keeps its domain id)
        if self.compositions and self.schema_version < COMPOSITIONS_SCHEMA_VERSION:
            self.schema_version = COMPOSITIONS_SCHEMA_VERSION
        if self.shift and self.schema_version < SHIFTS_SCHEMA_VERSION:
            self.schema_version = SHIFTS_SCHEMA_VERSION
        return self

    def check_catalogue(self) -> None:
        """Raise UserInputError if a corruption or its parameters are not in the catalogue."""
        from domainbench import corruptions
        for c in self.corruptions:
            try:
                corruptions.get(c.name)  # raises with close-name suggestions
                if c.params:
                    corruptions.validate_params(c.name, c.params)
            except corruptions.CorruptionError as e:
                raise UserInputError(str(e)) from e
        for comp in self.compositions:
            try:
                corruptions.check_steps(comp.pairs)
            except corruptions.CorruptionError as e:
                raise UserInputError(f"composition {comp.name!r}: {e}") from e
        for sh in self.shift:
            if _is_corruption(sh.name):
                raise UserInputError(f"shift name {sh.name!r} is also a corruption's name; rename the shift "
                                     f"(e.g. {sh.name + '-real'!r}) so its cells cannot be mistaken for synthetic ones")


def _is_corruption(name: str) -> bool:
    from domainbench import corruptions
    try:
        corruptions.get(name)  # aliases count: `elastic` names elastic_transform
        return True
    except corruptions.CorruptionError:
        return False


def _listed_once(values: list[str], what: str) -> list[str]:
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"{what} listed twice: {', '.join(dupes)}")
    return values


def _unless_default(default: Any, **constraints: Any) -> Any:
    """A field left out of ``model_dump`` while it holds its default (fields added for new features)."""
    return Field(default=default, exclude_if=lambda v: v == default, **constraints)


class LegacyModelFields(_Strict):
    """The run config's backend-family fields before per-model options (deprecated): each still loads,
    checked as it was, and becomes an option of every model whose backend takes it (``OPTION_OF``)."""

    questions: list[str] | None = None
    vlm_mode: Literal["loglik", "generate", "choice"] = "loglik"
    vlm_score: Literal["sum", "mean"] = "sum"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    concurrency: int = Field(default=8, ge=1)
    max_requests: int | None = Field(default=None, ge=1)
    api_key_env: str = Field(default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    request_timeout: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    retry_budget: float = Field(default=1800.0, gt=0, le=604800, allow_inf_nan=False)


#: a legacy run config field -> the per-model option it now is
OPTION_OF = {"questions": "questions", "vlm_mode": "mode", "vlm_score": "score", "dtype": "dtype",
             "concurrency": "concurrency", "max_requests": "max_requests", "api_key_env": "api_key_env",
             "request_timeout": "request_timeout", "retry_budget": "retry_budget"}


def apply_legacy_fields(data: Mapping[str, Any], override: bool = False) -> dict[str, Any]:
    """``data`` with its legacy backend-family fields moved onto ``model_args``: each becomes an option of
    every model whose backend takes it (an option already given for that model wins unless ``override``).
    A field no model takes is dropped: it never applied to them."""
    data = dict(data)
    legacy = {k: data.pop(k) for k in list(data) if k in OPTION_OF}
    legacy = {k: v for k, v in legacy.items() if v is not None}
    if not legacy:
        return data
    checked = LegacyModelFields.model_validate(legacy).model_dump(include=set(legacy))
    from domainbench.records.model_backends import option_keys

    models = data.get("models")
    args = {n: dict(a) for n, a in (data.get("model_args") or {}).items()}
    for name in models if isinstance(models, list) else []:
        if not isinstance(name, str):
            continue  # the models validator says what is wrong with it
        takes = option_keys(name)
        given = {OPTION_OF[k]: v for k, v in checked.items() if OPTION_OF[k] in takes}
        if given:
            args[name] = {**args.get(name, {}), **given} if override else {**given, **args.get(name, {})}
    data["model_args"] = args
    return data


def legacy_notes(data: Mapping[str, Any], where: str) -> list[str]:
    """A deprecation note for each legacy backend-family field ``data`` holds."""
    return [f"warning: {where}: {k} is deprecated: it is now the per-model option {OPTION_OF[k]!r} "
            f"(write it in a [models.\"NAME\"] table or as --model-arg NAME:{OPTION_OF[k]}=VALUE); "
            "it was applied to every model whose backend takes it" for k in data if k in OPTION_OF]


class RunConfig(_Strict):
    """How to evaluate: dataset, models, baseline, device and the engine's knobs.

    It validates itself, so every consumer (engine, report, UI) can rely on a baseline that is
    one of the models and a device torch understands.
    """

    schema_version: int = SCHEMA_VERSION
    dataset: str = "sample"
    # class names for zero-shot prediction; needed for an unlabeled folder, optional otherwise
    classes: list[str] | None = None
    # file images are resized (shorter side) and centre-cropped to this size
    image_size: int = Field(default=224, ge=1, le=bounds.MAX_IMAGE_SIZE)
    models: list[str] = Field(default_factory=lambda: ["embedded:fmnist-plain", "embedded:fmnist-augmented"])
    baseline: str | None = None
    # SeedSequence takes no negative seeds
    seed: int = Field(default=0, ge=0)
    batch_size: int = Field(default=128, ge=1, le=bounds.MAX_BATCH_SIZE)
    device: str = "auto"
    limit: int | None = Field(default=None, ge=1, le=bounds.MAX_LIMIT)
    templates: list[str] | None = None
    # images per unit of work; None picks a size that keeps one corrupted shard near 32 MB
    shard_size: int | None = Field(default=None, ge=1, le=bounds.MAX_SHARD_SIZE)
    # worker processes that decode and corrupt images; None: one per core, at most 8 (models on a CPU: two
    # cores fewer, the forward pass's); 0: in this process
    workers: int | None = Field(default=None, ge=0, le=bounds.MAX_WORKERS)
    # where corruptions run: cpu (numpy, worker processes), device (torch kernels on the models' device
    # where a corruption has one), auto (device when the models run on a GPU)
    corrupt_on: Literal["auto", "cpu", "device"] = "auto"
    stability: bool = True
    stability_points: int = Field(default=5, ge=1, le=bounds.MAX_STABILITY_POINTS)
    # images per shard whose embeddings are measured for stability (clean + m perturbed)
    stability_images: int = Field(default=64, ge=1, le=bounds.MAX_STABILITY_IMAGES)
    threat: bool = True
    threat_anchors: int = Field(default=50, ge=1, le=bounds.MAX_THREAT_ANCHORS)
    # per-model options, keyed by model name: only the keys given (``--model-arg NAME:key=value``, a
    # ``[models.NAME]`` table), each checked against its backend's options schema (domainbench.records.model_backends);
    # a model of the FMR oracle may have its options here too. Left out of a dump while empty.
    model_args: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=lambda v: not v)
    # adaptive evaluation (domainbench.engine.adaptive): images in seeded random rounds, each cell
    # stops once its anytime-valid interval is narrower than target_width or its pairs are decided
    adaptive: bool = _unless_default(False)
    target_width: float | None = _unless_default(None, gt=0, lt=1, allow_inf_nan=False)
    # breaking points (domainbench.engine.breaking_point): bisect each corruption's continuous scale per
    # model for where balanced accuracy falls below breaking_threshold (None: halfway from clean to chance)
    breaking_point: bool = _unless_default(False)
    breaking_threshold: float | None = _unless_default(None, gt=0, lt=1, allow_inf_nan=False)
    # an image file that does not decode stops the run (a silently smaller dataset changes every number)
    # unless the user chose to skip such files: they are then counted and listed in the run record
    skip_unreadable: bool = _unless_default(False)
    # what the run evaluates (domainbench.engine.task_kind): zero-shot classification (every run before tasks), or
    # VQA / image-text retrieval on a task manifest given as the dataset; left out of a dump while the default
    task: Literal["classification", "vqa", "retrieval"] = _unless_default("classification")
    # VQA: the answer's bound in new tokens (checked by models.vqa_answering.check_max_new_tokens)
    max_new_tokens: int = _unless_default(16)

    @model_validator(mode="before")
    @classmethod
    def _per_model_options(cls, data: Any) -> Any:
        """A ``[models.NAME]`` table lists the models with their options; the old backend-family fields
        (``vlm_mode``, ``concurrency``, ...) become the options of every model whose backend takes them."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if isinstance(data.get("models"), Mapping):
            tables = data["models"]
            bad = [n for n, opts in tables.items() if not isinstance(opts, Mapping)]
            if bad:
                raise ValueError(f"[models] table: {bad[0]!r} must be a table of its options ([models.\"{bad[0]}\"]), "
                                 "or list the models as models = [...]")
            args = {n: dict(v) for n, v in (data.get("model_args") or {}).items()}
            for name, opts in tables.items():
                args[name] = {**args.get(name, {}), **opts}
            data["models"], data["model_args"] = list(tables), {n: a for n, a in args.items() if a}
        return apply_legacy_fields(data)

    @field_validator("model_args")
    @classmethod
    def _options_fit_their_backend(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from domainbench.records.model_backends import UnknownModelError, given_options

        out = {}
        for name, opts in v.items():
            if not opts:
                continue
            try:
                out[name] = given_options(name, opts, given_as="options of model")
            except UnknownModelError:
                # a plug-in absent here (a stored run read on another machine): its loader checks them
                out[name] = dict(opts)
            except UserInputError as e:
                raise ValueError(str(e)) from None
        return out

    def options_of(self, model: str) -> dict[str, Any]:
        """The options given for ``model`` (its backend's defaults fill the rest when it loads)."""
        return dict(self.model_args.get(model, {}))

    @field_validator("models")
    @classmethod
    def _models_listed_once(cls, v: list[str]) -> list[str]:
        if not v or not all(m.strip() for m in v):
            raise ValueError("name at least one model, e.g. embedded:fmnist-plain")
        return _listed_once(v, "model")

    @field_validator("baseline")
    @classmethod
    def _baseline_is_a_model(cls, v: str | None, info: ValidationInfo) -> str | None:
        models = info.data.get("models")  # absent when the models themselves were invalid
        if v is not None and models is not None and v not in models:
            raise ValueError(f"baseline {v!r} is not among the run's models {models}; add it to --models")
        return v

    @field_validator("device")
    @classmethod
    def _device_torch_understands(cls, v: str) -> str:
        if not _DEVICE.fullmatch(v):
            raise ValueError(f"device {v!r} is not one of auto, cpu, cuda or cuda:N (a GPU index, e.g. cuda:1)")
        return v

    @field_validator("classes")
    @classmethod
    def _classes_listed_once(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("name at least one class, or leave the classes out to use the dataset's labels")
        return _listed_once(v, "class")

    @field_validator("templates")
    @classmethod
    def _templates_have_a_slot(cls, v: list[str] | None) -> list[str] | None:
        from domainbench.records.label_sets import TEMPLATE_SETS

        if v is not None and len(v) == 1 and v[0] in TEMPLATE_SETS:  # a built-in set: openai80, simple
            return v
        bad = [t for t in v or [] if t.count("{}") != 1]
        if bad:
            raise ValueError(f"each prompt template needs exactly one {{}} for the class name (or name a built-in set: "
                             f"{', '.join(TEMPLATE_SETS)}), got {bad}")
        return v

    @property
    def baseline_model(self) -> str:
        return self.baseline or self.models[0]

    @classmethod
    def from_sources(cls, file: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
                     notes: list[str] | None = None) -> RunConfig:
        """The run config file (or the defaults), then every override that is not None on top.

        ``overrides`` are keyed by field name, as the CLI's flags are; an invalid value is a
        ``UserInputError`` naming the flag (``--batch-size: …``), or the file when the bad
        value came from there. ``model_args`` ({model: {key: value}}, the ``--model-arg`` flags) are merged
        key by key over the file's; a deprecated backend-family field in the file adds a note to ``notes``.
        """
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        base: dict[str, Any] = {}
        if file is not None:
            raw = _read_toml(file)
            if notes is not None:
                notes.extend(legacy_notes(raw, f"run config {file}"))
            base = _validate(raw, RunConfig, file).model_dump()
        merged = base | {k: v for k, v in given.items() if k not in OPTION_OF and k != "model_args"}
        # flags over the file: an old backend-family flag (--vlm-mode, --concurrency) over the file's options,
        # a --model-arg over both
        legacy = {k: v for k, v in given.items() if k in OPTION_OF}
        try:
            merged = apply_legacy_fields(merged | legacy, override=True)
        except ValidationError as e:
            loc, msg = first_validation_error(e)
            raise UserInputError(f"--{_FLAGS.get(loc, loc.replace('_', '-'))}: {msg}") from None
        args = {n: dict(a) for n, a in (merged.get("model_args") or {}).items()}
        for name, opts in (given.get("model_args") or {}).items():
            args[name] = {**args.get(name, {}), **opts}
        merged["model_args"] = args
        try:
            cfg = cls.model_validate(merged)
        except ValidationError as e:
            loc, msg = first_validation_error(e)
            field = loc.split(".")[0]
            if field == "model_args":  # the file's options were checked as it loaded: these are the flags'
                raise UserInputError(msg.replace("options of model", "--model-arg", 1)) from None
            if field not in given and file is not None:
                raise UserInputError(f"run config {file}: {loc}: {msg}") from None
            raise UserInputError(f"--{_FLAGS.get(field, field.replace('_', '-'))}: {msg}") from None
        # here, not in a validator: a stored run's config must load on a machine with less memory
        problem = bounds.batch_memory_problem(cfg.batch_size, cfg.image_size)
        if problem:
            raise UserInputError(problem if "batch_size" in given or file is None else f"run config {file}: {problem}")
        return cfg


# the CLI flag of a RunConfig field, where it is not the field's name with dashes
_FLAGS = {"templates": "template", "questions": "question", "": "run-config", "breaking_threshold": "breaking-point",
          "model_args": "model-arg"}
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


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
    data = cfg.model_dump(mode="json")
    if isinstance(cfg, DomainConfig) and not cfg.compositions:
        del data["compositions"]  # a plan without compositions reads as it did before they existed
    data = _drop_none(data)
    if isinstance(cfg, RunConfig) and cfg.model_args:
        # a model's options travel with it: [models."NAME"] tables, in the models' order (the options of a
        # model outside the list, an FMR oracle member, stay in [model_args."NAME"])
        args = data.pop("model_args")
        data["models"] = {m: args.pop(m, {}) for m in cfg.models}
        if args:
            data["model_args"] = args
    text = tomli_w.dumps(data)
    # tomli_w puts every array element on its own line; severities read better as [1, 2, 3]
    return _INT_ARRAY.sub(lambda m: "[" + ", ".join(v.strip().rstrip(",") for v in m.group(1).splitlines()) + "]", text)


def save(cfg: BaseModel, path: str | Path) -> Path:
    from domainbench.runtime.safe_output import write_atomically

    write_atomically(path, dumps(cfg))
    return Path(path)


def _load(path: str | Path, model: type[BaseModel]) -> Any:
    return _validate(_read_toml(path), model, path)


def _validate(data: dict[str, Any], model: type[BaseModel], path: str | Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        loc, msg = first_validation_error(e)
        if loc == "model_args":  # the message names the model, the key and the fix
            raise UserInputError(msg.replace("options of model", f"config file {path}: [models]", 1)) from None
        raise UserInputError(f"config file {path}: {loc}: {msg}; fix that field and retry") from e


def _read_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"config file {path} is a folder; give the TOML file in it (e.g. {path}/domain.toml)")
    if path.exists() and not path.is_file():
        raise UserInputError(f"config file {path} is not a regular file (a device, FIFO or socket); give a TOML file")
    if not path.is_file():
        raise UserInputError(f"config file {path} does not exist; create one with `domainbench plan \"...\" -o {path}`")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(f"config file {path} is not UTF-8 text (byte offset {e.start}: {raw[e.start:e.start + 1]!r}); "
                             "save it as UTF-8 and retry") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write: not part of the TOML
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserInputError(f"config file {path} is not valid TOML ({e}); fix the syntax and retry") from e
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise UserInputError(f"config file {path} nests arrays or tables too deeply to read; "
                             "fix the file (a config needs at most a few levels)") from None
    return data


def load_domain(path: str | Path, check: bool = True, notes: list[str] | None = None) -> DomainConfig:
    """The domain config in ``path``; ``check``: its corruptions are in the catalogue, aliases merged.

    Two names of one corruption (``elastic`` and ``elastic_transform``) are evaluated once: the
    warning for each merge is appended to ``notes``.
    """
    cfg: DomainConfig = _load(path, DomainConfig)
    if check:
        try:
            cfg.check_catalogue()
            cfg, merged = merge_aliases(cfg)
        except UserInputError as e:
            raise UserInputError(f"config file {path}: {e}") from e
        if notes is not None:
            notes.extend(f"warning: config file {path}: {m}" for m in merged)
    return cfg


def merge_aliases(cfg: DomainConfig) -> tuple[DomainConfig, list[str]]:
    """``cfg`` with two names of one corruption merged into the first one listed.

    A merge takes the union of the severities; two names with different explicit parameters
    cannot be merged and are a UserInputError. Returns the config and a message per merge.
    """
    from domainbench import corruptions

    merged: dict[str, CorruptionChoice] = {}
    spelled: dict[str, str] = {}
    notes = []
    for c in cfg.corruptions:
        name = corruptions.get(c.name).name
        first = merged.get(name)
        if first is None:
            merged[name], spelled[name] = c, c.name
            continue
        if first.params != c.params:
            raise UserInputError(f"{spelled[name]!r} and {c.name!r} are the same corruption ({name}) with different "
                                 "params; keep one of them")
        severities = sorted(set(first.severities) | set(c.severities))
        merged[name] = first.model_copy(update={"severities": severities, "reason": first.reason or c.reason})
        notes.append(f"{spelled[name]!r} and {c.name!r} are the same corruption ({name}): evaluated once, "
                     f"at severities {severities}")
    if not notes:
        return cfg, []
    return cfg.model_copy(update={"corruptions": list(merged.values())}), notes


def load_run(path: str | Path) -> RunConfig:
    return _load(path, RunConfig)


# --------------------------------------------------------------------------- FMR runs

#: the FMR knobs of a run (``domainbench fmr``), stored with the run so a resumed run searches exactly the same way
Search = Literal["greedy", "gradient"]


class FmrSettings(BaseModel):
    """Oracle zoo, search kind and its budget; the seed is the run config's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    oracle: list[str]
    search: Search = "greedy"
    #: accepted perturbation steps at most per image (the paper's B)
    budget: int = Field(default=10, ge=0)
    #: candidate perturbations scored per step (greedy search)
    candidates: int = Field(default=4, ge=1)
    #: how far one step moves a parameter, as a fraction of its range
    step_size: float = Field(default=0.2, gt=0.0, le=1.0)
    #: images per stored unit; None: as many as keep the unit's PNG payloads under 8 MB
    #: (MongoDB refuses documents over 16 MB), at most 50
    shard_size: int | None = Field(default=None, ge=1)

    @field_validator("oracle")
    @classmethod
    def _listed_once(cls, v: list[str]) -> list[str]:
        dupes = sorted({m for m in v if v.count(m) > 1})
        if dupes:
            raise ValueError(f"oracle model listed twice: {', '.join(dupes)}")
        return v
