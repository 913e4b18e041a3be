"""Data for the New domain page's plan editor, launch form and queue panel (no Streamlit here).

A run launched from the page goes into the store's queue (``domainbench.service.launch``); a worker
(``domainbench worker``, started beside ``domainbench ui``) takes it from there.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from domainbench.records.config import CorruptionChoice, DomainConfig, FmrSettings, RunConfig
from domainbench import query
from domainbench.query import RunRecord, Store, run_status
from domainbench.errors import UserInputError
from domainbench.service.runs import REQUEUEABLE, requeue


@dataclass(frozen=True)
class TextCheck:
    """What the planner will read of a description: its length and where a long one is cut."""

    chars: int
    kept: int
    truncated: bool
    tail: str  # the last words the planner reads of a cut text

    def message(self) -> str:
        return (f"The description has {self.chars:,} characters; the planner reads only the first {self.kept:,} "
                f"(up to “…{self.tail}”) and is told the rest was cut. Shorten it to what makes images worse.")


def check_text(text: str) -> TextCheck:
    """``UserInputError`` for an empty description; otherwise how much of it the planner uses."""
    from domainbench.planner import MAX_DOMAIN_CHARS, prepare_domain_text

    prepared = prepare_domain_text(text)  # the planner's own cut, so what we show is what it reads
    chars = len(text.strip())
    if chars <= MAX_DOMAIN_CHARS:
        return TextCheck(chars, chars, False, "")
    kept = prepared.rsplit("\n", 1)[0]
    return TextCheck(chars, len(kept), True, " ".join(kept.split()[-6:]))


def catalogue_names() -> list[str]:
    from domainbench import corruptions
    return sorted(corruptions.names())


def severity_levels(name: str) -> list[int]:
    """The severities a corruption has: 1–5, or 1 alone for one whose severity is no distortion scale (a flip: its
    five levels are the same image, so levels 2–5 would be copies of cell 1)."""
    from domainbench import corruptions

    try:
        ordinal = corruptions.get(name).ordinal
    except Exception:  # not in the registry: the plan's check names it
        ordinal = True
    return [1, 2, 3, 4, 5] if ordinal else [1]


def edited_domain(cfg: DomainConfig, rows: list[dict[str, Any]], compositions: list[str] | None = None) -> DomainConfig:
    """The planned domain with the user's corruptions and severities and, of its compositions, those named in
    ``compositions`` (all when None); errors name the corruption."""
    choices = []
    for row in rows:
        if not row["severities"]:
            raise UserInputError(f"{row['name']}: choose at least one severity (1–5) or remove the corruption")
        choices.append(CorruptionChoice(name=row["name"], severities=sorted(row["severities"]),
                                        params=row.get("params") or {}, reason=row.get("reason") or "added by hand"))
    if not choices:
        raise UserInputError("the plan has no corruption left; add one before launching")
    kept = cfg.compositions if compositions is None else [c for c in cfg.compositions if c.name in compositions]
    out = cfg.model_copy(update={"corruptions": choices, "compositions": kept})
    out.check_catalogue()
    return out


def fit_plan(cfg: DomainConfig, dataset: str) -> DomainConfig:
    """The planned domain without the corruptions and severities that leave ``dataset``'s images unchanged
    (``planner.image_fit``, as ``plan --dataset``); unchanged when no dataset is given."""
    if not dataset.strip():
        return cfg
    from domainbench.planner.image_fit import fit_to_images, probe_images

    return fit_to_images(cfg, *probe_images(dataset.strip()))


def photo_plan(cfg: DomainConfig | None, uploads: Sequence[tuple[str, bytes]], dataset: str) -> tuple[DomainConfig, list[str]]:
    """``cfg`` (the text's plan, or None) combined with what the uploaded deployment photos measure against
    ``dataset``'s clean images, as ``plan --photos`` does; and the warnings about photos that were skipped."""
    from domainbench.planner import photo_fit

    with tempfile.TemporaryDirectory(prefix="domainbench-photos-") as tmp:
        folder = Path(tmp)
        for i, (name, blob) in enumerate(uploads):  # numbered: two uploads may share a name
            (folder / f"{i:03d}-{Path(name).name}").write_bytes(blob)
        try:
            m = photo_fit.measure(folder, dataset.strip() or "sample")
        except UserInputError as e:  # the messages name the temporary folder: name the upload instead
            raise UserInputError(str(e).replace(f"--photos {folder}", "the uploaded photos")) from e
    return photo_fit.to_plan(m.photos, m.ref, cfg=cfg, source="uploaded deployment photos"), m.warnings


def plan_notes(cfg: DomainConfig) -> tuple[pd.DataFrame | None, list[str]]:
    """A voting plan's agreement as a table (planner, its choices, Jaccard with each other planner),
    and the plan's other notes."""
    notes = list(cfg.planner.violations)
    chose = {n.split(" chose: ", 1)[0]: n.split(" chose: ", 1)[1] for n in notes if " chose: " in n}
    if cfg.planner.provider != "council" or not chose:
        return None, notes
    pairs: dict[tuple[str, str], str] = {}
    for n in notes:
        if n.startswith("agreement ") and ": Jaccard " in n:
            who, value = n.removeprefix("agreement ").rsplit(": Jaccard ", 1)
            a, _, b = who.partition(" vs ")
            pairs[(a, b)] = pairs[(b, a)] = value
    rows = [{"planner": k, "chose": v, **{f"Jaccard with {o}": pairs.get((k, o), "—") for o in chose}}
            for k, v in chose.items()]
    rest = [n for n in notes if " chose: " not in n and not (n.startswith("agreement ") and ": Jaccard " in n)]
    return pd.DataFrame(rows), rest


def plan_rows(cfg: DomainConfig) -> list[dict[str, Any]]:
    return [{"name": c.name, "severities": list(c.severities), "initial": list(c.severities), "params": dict(c.params),
             "reason": c.reason} for c in cfg.corruptions]


def run_config(models: list[str], dataset: str, limit: int | None, baseline: str | None, device: str,
               stability: bool, threat: bool, skip_unreadable: bool = False) -> RunConfig:
    """The run configuration from the form, with the page's words in its errors."""
    if not models:
        raise UserInputError("choose at least one model to evaluate")
    if not dataset.strip():
        raise UserInputError("the dataset is empty; use `sample` or a path to an image folder / CSV manifest")
    if baseline and baseline not in models:
        raise UserInputError(f"baseline {baseline!r} is not one of the chosen models ({', '.join(models)}); "
                             "leave it empty to use the first model")
    try:
        return RunConfig(models=models, dataset=dataset.strip(), limit=limit, baseline=baseline or None,
                         device=device, stability=stability, threat=threat, skip_unreadable=skip_unreadable)
    except ValueError as e:
        from pydantic import ValidationError

        if isinstance(e, ValidationError):
            from domainbench.errors import first_validation_error

            loc, msg = first_validation_error(e)
            raise UserInputError(f"{loc}: {msg}") from None
        raise


def fmr_settings(oracle: str, budget: int) -> FmrSettings:
    """An FMR search from the form: the oracle's comma-separated names and the step budget."""
    from domainbench.fmr.oracle import check_oracle_names

    names = [n.strip() for n in oracle.split(",") if n.strip()]
    check_oracle_names(names)
    try:
        return FmrSettings(oracle=names, budget=budget)
    except ValueError as e:
        from pydantic import ValidationError

        if isinstance(e, ValidationError):
            from domainbench.errors import first_validation_error

            loc, msg = first_validation_error(e)
            raise UserInputError(f"FMR {loc}: {msg}") from None
        raise


def is_clip_folder(dataset: str) -> bool:
    """Whether the launch form's dataset names clips (a clip run is queued for it)."""
    from domainbench.data.clips import is_clip_dataset

    return bool(dataset.strip()) and is_clip_dataset(dataset.strip())


def enqueue(store: Store, domain: DomainConfig, cfg: RunConfig, fmr: FmrSettings | None = None,
            frames: int | None = None) -> RunRecord:
    """Check every input and queue the run, an FMR search with ``fmr`` settings, a clip run when the dataset is a
    clip folder (``frames`` sampled per clip, default 8) (``DuplicateRunError`` when the same run is queued or
    running)."""
    from domainbench.service.launch import enqueue_run

    sampling = None
    if frames is not None:
        from domainbench.data.clips import Sampling

        sampling = Sampling(frames=frames, seed=cfg.seed)
    return enqueue_run(store, domain, cfg, fmr=fmr, sampling=sampling)


def queue_frame(store: Store, limit: int = 12) -> pd.DataFrame:
    """The runs a user launched or may resume, newest first: queued, running, interrupted, failed, recent done."""
    rows = []
    for r in query.list_runs(store):
        status = run_status(r)
        if status == "done" and r.queued_at is None:
            continue  # finished runs started from a terminal belong on the Runs page only
        rows.append({"run": r.run_id, "status": status, "domain": r.domain.domain[:80],
                     "models": ", ".join(r.config.models), "worker": r.worker or "", "attempts": r.attempts,
                     "queued": r.queued_at or "", "resumable": status in REQUEUEABLE})
        if len(rows) >= limit:
            break
    return pd.DataFrame(rows, columns=["run", "status", "domain", "models", "worker", "attempts", "queued", "resumable"])


def resume(store: Store, run_id: str) -> RunRecord:
    """Put an interrupted or failed run back into the queue; finished units are kept."""
    return requeue(store, run_id)
