"""Clip runs (issue 41): every model on every sampled frame of every clip, clean and under each cell of the plan.

A clip run is started by :func:`start_clip_run` (``domainbench run PLAN --dataset CLIPS [--frames N]``). Before
anything is stored it checks the plan, opens the clips, decodes every clip's sampled frames and loads the
models, so a bad clip or a bad option ends in one ``error:`` line with nothing written. It then creates the run
(``RunRecord.kind = "clip"``) and stores each unit, one (model, cell), as a ``clip_units`` document as it
finishes (a run stored before that collection keeps them on its record, ``kind_settings["units"]``, read and
continued as they are), so a killed run resumes (:func:`resume_clip_run`, ``run --resume RUN``, ``Engine.resume``)
without recomputing a stored unit, after checking that the clips and their sampled frames are the ones it started
on. When every unit is stored, the rows of metrics (``metrics.clips``) and the paired verdicts are stored on the
run record and the run is done. A queued clip run (``check_clip_inputs``, then ``service.launch.enqueue_run``)
is decoded, recorded and evaluated by the worker that takes it.

Cells: the clean clips, then each corruption × severity of the plan. A temporal corruption
(``corruptions.clips.is_temporal``) evolves across the frames of a clip; an image corruption is applied with
one draw for the whole clip (``mode = "static"`` in the plan's corruption table) or a new draw per frame
(``"independent"``, the default). Every clip's corruption seed comes from the run's seed and the clip's name
only: the same on every cell, process and order.

Models: a contrastive model scores each frame (its embedding and zero-shot prediction); the clip's prediction
is reported by the mean of its frames' embeddings and by majority vote. A generative VLM answers each frame as
an image (no mean embedding; the vote only). Units compute in this process (:class:`LocalClipUnits`) or on Ray
(``engine.clip_ray``): the same corruption (``engine.clip_scoring``) and unit code, so the same stored units.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from domainbench.records.config import DomainConfig, RunConfig
from domainbench.data.clips import ClipDataset, DecodedClip, Sampling, decode_clips, open_clips
from domainbench.engine.clip_scoring import CLEAN, ClipCell, Scored, Todo, clip_seed, corrupt
from domainbench.engine.kinds import KindCapabilities, RunSession, SelfRunKind, register_kind
from domainbench.errors import UserInputError
from domainbench.store import Store
from domainbench.store.records import DatasetInfo, RunRecord

CLIP_KIND = "clip"
DEFAULT_MODE = "independent"


def _temporal(name: str) -> bool:
    try:
        from domainbench.corruptions.clips import is_temporal
    except ImportError:  # a build without temporal corruptions: every corruption is an image corruption
        return False
    return bool(is_temporal(name))


def clip_cells(domain: DomainConfig) -> list[ClipCell]:
    """The clean cell, then every corruption × severity of the plan (compositions and explicit params refused)."""
    if domain.compositions:
        raise UserInputError(f"composition {domain.compositions[0].cell_name!r}: clip runs do not evaluate compositions "
                             "yet; remove the [[composition]] tables from the plan")
    cells = [ClipCell(CLEAN, 0, None)]
    for c in domain.corruptions:
        if c.params:
            raise UserInputError(f"corruption {c.name!r}: explicit params are not applied to clips yet; "
                                 "remove its params and choose severities")
        mode = c.mode
        if _temporal(c.name):
            if mode is not None:
                raise UserInputError(f"corruption {c.name!r} is temporal: it has its own course over the frames and "
                                     f"takes no mode; remove mode = {mode!r} from its plan entry")
        else:
            mode = mode or DEFAULT_MODE
        cells += [ClipCell(c.name, s, mode) for s in c.severities]
    return cells


def refuse_temporal_on_images(domain: DomainConfig) -> None:
    """A still-image run cannot apply a temporal corruption: refused in one line naming it and the fix."""
    temporal = [c.name for c in domain.corruptions if _temporal(c.name)]
    if temporal:
        more = f" (and {', '.join(map(repr, temporal[1:]))})" if len(temporal) > 1 else ""
        raise UserInputError(f"corruption {temporal[0]!r}{more} is temporal (it evolves across a clip's frames) and "
                             "does not apply to still images; give --dataset a clip folder (class folders of videos "
                             "or of frame folders), or remove the temporal corruptions from the plan")


def still_image_plan(domain: DomainConfig) -> tuple[DomainConfig, list[str]]:
    """The plan a still-image run evaluates, and the temporal corruptions it leaves out.

    A footage domain's plan ("dash-cam video at night") holds temporal corruptions beside image ones, and people
    often evaluate it on extracted frames: the image part is run and the rest named, rather than refusing the
    whole plan. A plan of temporal corruptions only has nothing for still images and is refused."""
    temporal = [c.name for c in domain.corruptions if _temporal(c.name)]
    if not temporal:
        return domain, []
    if len(temporal) == len(domain.corruptions):
        refuse_temporal_on_images(domain)
    kept = [c for c in domain.corruptions if not _temporal(c.name)]
    return domain.model_copy(update={"corruptions": kept}), temporal


def left_out_note(temporal: list[str]) -> str:
    return (f"note: {', '.join(temporal)} {'is' if len(temporal) == 1 else 'are'} temporal (evolving across a "
            "clip's frames) and left out of this still-image run; give --dataset a clip folder to evaluate "
            f"{'it' if len(temporal) == 1 else 'them'}")


def unit_key(model: str, cell: ClipCell) -> str:
    return f"{model}\t{cell.key}"


@dataclass
class ClipInputs:
    """What a start or a resume has opened before anything is written."""

    dataset: ClipDataset
    sampling: Sampling
    clips: list[DecodedClip]
    unreadable: list[tuple[str, str]]
    cells: list[ClipCell]


def check_clip_options(domain: DomainConfig, cfg: RunConfig, executor: str = "local") -> None:
    allowed = ClipKind.capabilities.executors  # the kind's declared capabilities say where it runs
    if executor not in allowed:
        raise UserInputError(f"--executor {executor}: clip runs execute on --executor {' or '.join(allowed)} only; "
                             f"choose --executor {allowed[0]} or leave it out")
    given = [flag for flag, on in (("--adaptive", cfg.adaptive), ("--breaking-point", cfg.breaking_point),
                                   ("--shift / [[shift]]", bool(domain.shift)), ("--limit", cfg.limit is not None),
                                   ("--task", cfg.task != "classification")) if on]
    if given:
        raise UserInputError(f"{given[0]}: clip runs evaluate every sampled frame of every clip in every cell and do "
                             "not support it yet; leave it out")


def check_clip_inputs(domain: DomainConfig, cfg: RunConfig, sampling: Sampling) -> tuple[RunConfig, dict[str, Any]]:
    """What a worker would refuse of a queued clip run, checked before it is queued (the plan, the options, the
    image size, the clips listed and their classes; the clips are decoded by the worker, which fails the run naming
    a clip that does not decode); the config and kind settings to store."""
    from domainbench.engine.dataset_pin import pinned_config

    check_clip_options(domain, cfg)
    sampling = sampling.check()
    _open_checked(domain, cfg)
    return pinned_config(cfg), {"sampling": sampling.as_dict()}


def _open_checked(domain: DomainConfig, cfg: RunConfig) -> tuple[list[ClipCell], Any]:
    """The plan's cells and the clip dataset listed (nothing decoded), each checked: frames large enough to
    corrupt, at least two classes."""
    from domainbench.corruptions.api import MIN_SIDE
    from domainbench.records.label_sets import resolve_classes

    cells = clip_cells(domain)
    domain.check_catalogue()
    if cfg.image_size < MIN_SIDE:
        raise UserInputError(f"image_size = {cfg.image_size}: corruptions need frames of at least {MIN_SIDE}x{MIN_SIDE} "
                             f"pixels; set image_size to {MIN_SIDE} or more")
    ds = open_clips(cfg.dataset, resolve_classes(cfg.classes), cfg.image_size)
    if len(ds.classes) < 2:
        raise UserInputError(f"clip dataset {cfg.dataset} has a single class {ds.classes}: zero-shot accuracy would be 1 "
                             "by construction; give at least two classes")
    return cells, ds


def open_inputs(domain: DomainConfig, cfg: RunConfig, sampling: Sampling) -> ClipInputs:
    cells, ds = _open_checked(domain, cfg)
    workers = cfg.workers if cfg.workers is not None else min(8, os.cpu_count() or 1)
    clips, unreadable = decode_clips(ds, sampling, skip_unreadable=cfg.skip_unreadable, workers=workers)
    return ClipInputs(ds, sampling, clips, unreadable, cells)


def _load_models(store: Store, cfg: RunConfig, classes: list[str]) -> list[Any]:
    from domainbench.engine.scoring import load_models

    return load_models(cfg.models, classes, cfg.device, cfg.batch_size, cfg.templates, options=cfg.model_args,
                       cache=store)


class ClipUnits(Protocol):
    """Where a clip run's (model, cell) units compute: this process (``LocalClipUnits``) or Ray actors
    (``engine.clip_ray.ClipUnitsOnRay``). Both corrupt with ``corrupt`` and score with ``score_cell``, so a run
    stores the same units on either."""

    def environment(self) -> dict[str, Any]:
        """What the run record keeps of where it ran."""

    def units(self, run_id: str, todo: Todo, clips: list[DecodedClip], seed: int) -> Iterator[Scored]:
        """Every unit of ``todo``, each handed back as it finishes (any order)."""

    def close(self) -> None:
        """Release what the part holds (Ray's actors)."""


class LocalClipUnits:
    """The models in this process; each cell corrupted here once, then scored by every model that lacks it."""

    def __init__(self, store: Store, cfg: RunConfig, classes: list[str]) -> None:
        from domainbench.models import resolve_device

        self.models = {m.name: m for m in _load_models(store, cfg, classes)}
        self._device = str(resolve_device(cfg.device))

    def environment(self) -> dict[str, Any]:
        return {"device": self._device, "executor": "local", "host": platform.node()}

    def units(self, run_id: str, todo: Todo, clips: list[DecodedClip], seed: int) -> Iterator[Scored]:
        for cell, names in todo:
            frames = [corrupt(cell, c, seed) for c in clips]
            for name in names:
                yield name, cell, score_cell(self.models[name], frames)

    def close(self) -> None:
        pass


def clip_units(store: Store, cfg: RunConfig, classes: list[str], executor: Any = None,
               say: Callable[[str], None] | None = None) -> ClipUnits:
    """The run's models loaded where ``executor`` computes (``local``, ``ray``, an ``ExecutorOptions`` or a
    ``RayExecutor``); nothing is stored yet."""
    name = _executor_name(executor)
    if name == "local":
        return LocalClipUnits(store, cfg, classes)
    from domainbench.engine.clip_ray import ClipUnitsOnRay  # imports ray: only for --executor ray

    # the actors score with this module's score_cell, handed to them (Ray sends it by its import path)
    return ClipUnitsOnRay(store, cfg, classes, executor, say or (lambda _m: None), score_cell)


def _executor_name(executor: Any) -> str:
    if executor is None:
        return "local"
    if isinstance(executor, str):
        return executor
    return str(getattr(executor, "kind", None) or getattr(executor, "name", "local"))


def score_cell(ms: Any, frames: list[np.ndarray]) -> dict[str, Any]:
    """One model on one cell's clips: each frame's prediction and, with embeddings, each clip's mean-embedding one.
    A generative model that takes video (``accepts_video``: Qwen2-VL through transformers) also answers each clip
    with its sampled frames as one video input (``video_preds``, one per clip; ``video_answers`` in generate mode);
    its frames are still answered one by one, which the frame metrics and the flip rate need."""
    import torch

    from domainbench.engine.scoring import classify, predict

    lengths = [len(f) for f in frames]
    scored = classify(ms, np.concatenate(frames), embeddings=False)
    bounds = np.cumsum([0, *lengths])
    preds = [scored.preds[a:b].astype(int).tolist() for a, b in zip(bounds[:-1], bounds[1:])]
    mean_preds = None
    if scored.embeddings is not None:
        emb = scored.embeddings.float()
        means = torch.stack([emb[a:b].mean(dim=0) for a, b in zip(bounds[:-1], bounds[1:])])
        means = torch.nn.functional.normalize(means, dim=1).to(scored.embeddings.dtype)
        mean_preds = predict(ms, means).astype(int).tolist()
    out: dict[str, Any] = {"preds": preds, "mean_preds": mean_preds}
    accepts_video = getattr(ms.model, "accepts_video", None)
    if callable(accepts_video) and accepts_video():
        video = ms.model.classify_videos(frames)
        out["video_preds"] = video.preds.astype(int).tolist()
        if video.answers is not None:
            out["video_answers"] = list(video.answers)
    return out


def _clips_record(inputs: ClipInputs) -> list[dict[str, Any]]:
    return [{"clip": d.clip.name, "label": d.clip.label, "frame_indices": d.indices,
             "times": [round(t, 6) for t in d.times], "fps": d.fps, "total_frames": d.total_frames}
            for d in inputs.clips]


#: what a video-input model (``hf-vlm`` Qwen2-VL) stores besides its per-frame answers
VIDEO_KEYS = ("video_preds", "video_answers")


def stored_units(store: Store, run: RunRecord) -> dict[str, Any]:
    """The run's stored units by key (``unit_key``): each a ``clip_units`` document; a run stored before that
    collection keeps them on its record (``kind_settings["units"]``), read as they are."""
    units = dict((run.kind_settings or {}).get("units", {}))
    for u in store.clip_units(run.run_id):
        units[f"{u.model}\t{u.cell}"] = {"model": u.model, "cell": u.cell, "preds": u.preds, "mean_preds": u.mean_preds,
                                         **{k: v for k in VIDEO_KEYS if (v := getattr(u, k)) is not None}}
    return units


def _put_unit(store: Store, run_id: str, name: str, cell: ClipCell, scored: dict[str, Any]) -> None:
    """Store one finished unit as its own document (a long run's record does not grow with its units)."""
    from domainbench.engine.lifecycle import now
    from domainbench.store.records import ClipUnitRecord

    store.clip_units.put(ClipUnitRecord(run_id=run_id, model=name, cell=cell.key, preds=scored["preds"],
                                        mean_preds=scored["mean_preds"], computed_at=now(),
                                        **{k: scored[k] for k in VIDEO_KEYS if k in scored}))


def _evaluate(store: Store, run_id: str, cfg: RunConfig, inputs: ClipInputs, part: ClipUnits,
              say: Callable[[str], None]) -> tuple[int, int]:
    """Every unit still missing, computed by ``part`` and stored one by one as it finishes; then the rows, verdicts
    and status done. (units computed now, units already stored). A failure marks the run "failed" ("interrupted"
    for Ctrl-C) with its finished units kept; a cancelled run stays "cancelled"."""
    from domainbench.engine.cancel import CancelWatch, RunCancelled
    from domainbench.engine.lifecycle import now
    from domainbench.store.fenced_store import fenced_for_this_process

    run = store.get_run(run_id)
    assert run is not None and run.kind_settings is not None
    units = stored_units(store, run)
    legacy = "units" in run.kind_settings  # a run stored before clip_units: its units stay on its record
    names = list(cfg.models)
    todo: Todo = [(cell, missing) for cell in inputs.cells
                  if (missing := [m for m in names if unit_key(m, cell) not in units])]
    skipped, computed = len(units), 0
    watch = CancelWatch(store, run_id)
    fenced = fenced_for_this_process(store, run_id)  # `rm --force` and a lost lease stop the writes
    try:
        watch.check(now=True)
        for name, cell, scored in part.units(run_id, todo, inputs.clips, cfg.seed):
            units[unit_key(name, cell)] = {"model": name, "cell": cell.key, **scored}
            if legacy:
                fenced.update_run(run_id, kind_settings={**run.kind_settings, "units": units})
            else:
                _put_unit(fenced, run_id, name, cell, scored)
            computed += 1
            say(f"{name} · {cell.key}: {sum(len(p) for p in scored['preds'])} frames")
            watch.check()
        run = store.get_run(run_id)
        assert run is not None and run.kind_settings is not None
        ks = dict(run.kind_settings)
        ks.update(clip_results(ks["clips"], units, names, inputs.cells))
        fenced.update_run(run_id, kind_settings=ks, status="done", finished_at=now())
    except RunCancelled:
        raise  # the run stays "cancelled", its finished units kept
    except KeyboardInterrupt:
        store.update_run(run_id, status="interrupted", finished_at=now())
        raise
    except Exception as e:
        store.update_run(run_id, status="failed", finished_at=now(), error=f"{type(e).__name__}: {e}"[:500])
        raise
    finally:
        part.close()
    return computed, skipped


def clip_results(clips: list[dict[str, Any]], units: dict[str, Any], models: list[str],
                 cells: list[ClipCell]) -> dict[str, Any]:
    """The run's rows (one per model × cell, ``metrics.clips.cell_metrics``) and paired verdicts from its units."""
    from domainbench.metrics.clips import ClipCellData, cell_metrics, paired_verdicts

    labels_list = [c["label"] for c in clips]
    labels = None if any(lab is None for lab in labels_list) else np.asarray(labels_list, dtype=int)
    data: dict[tuple[str, str], ClipCellData] = {}
    for u in units.values():
        data[(u["model"], u["cell"])] = ClipCellData(
            [np.asarray(p, dtype=int) for p in u["preds"]], labels,
            None if u["mean_preds"] is None else np.asarray(u["mean_preds"]),
            None if u.get("video_preds") is None else np.asarray(u["video_preds"], dtype=int))
    rows = []
    for m in models:
        clean = data[(m, CLEAN)]
        for cell in cells:
            d = data[(m, cell.key)]
            metrics = cell_metrics(d, None if cell.corruption == CLEAN else clean)
            rows.append({"model": m, "corruption": cell.corruption, "severity": cell.severity, "mode": cell.mode,
                         **metrics})
    return {"rows": _json_safe(rows), "paired": _json_safe(paired_verdicts(data, models, [c.key for c in cells]))}


def _json_safe(value: Any) -> Any:
    from domainbench.engine.task_kind import _json_safe as safe

    return safe(value)


def _info(inputs: ClipInputs, cfg: RunConfig) -> DatasetInfo:
    from domainbench.data.fingerprint import dataset_fingerprint

    ds = inputs.dataset
    return DatasetInfo(name=ds.name, size=len(ds), classes=ds.classes, labelled=ds.labelled, path=cfg.dataset,
                       fingerprint=dataset_fingerprint(ds))


def start_clip_run(store: Store, domain: DomainConfig, cfg: RunConfig, sampling: Sampling, run_id: str | None = None,
                   say: Callable[[str], None] | None = None, executor: Any = "local") -> str:
    """Check, open and decode everything, load the models where ``executor`` computes (``local``, ``ray`` or an
    ``ExecutorOptions``), then create the clip run and evaluate it; the run id."""
    from domainbench.engine.dataset_pin import pinned_config
    from domainbench.engine.lifecycle import check_new_run_id, create_run

    say = say or (lambda _m: None)
    check_clip_options(domain, cfg, _executor_name(executor))
    check_new_run_id(store, run_id)
    cfg = pinned_config(cfg)
    inputs = open_inputs(domain, cfg, sampling.check())
    part = clip_units(store, cfg, inputs.dataset.classes, executor, say)
    try:
        settings = {"sampling": sampling.as_dict(), "clips": _clips_record(inputs),
                    "unreadable": [{"clip": c, "why": w} for c, w in inputs.unreadable]}
        rid = create_run(store, domain, cfg, run_id, _info(inputs, cfg), part.environment(), kind=CLIP_KIND,
                         kind_settings=settings)
    except BaseException:
        part.close()
        raise
    _evaluate(store, rid, cfg, inputs, part, say)
    return rid


def resume_clip_run(store: Store, run_id: str, say: Callable[[str], None] | None = None,
                    executor: Any = "local") -> str:
    """Continue a clip run (interrupted, failed, or a queued run's first start): the same clips and sampled frames
    (checked), only the units not stored yet, on ``executor`` (``local``, ``ray``, an ``ExecutorOptions``)."""
    return continue_clip_run(store, run_id, say, executor)[0]


def continue_clip_run(store: Store, run_id: str, say: Callable[[str], None] | None = None,
                      executor: Any = "local") -> tuple[str, int, int]:
    """:func:`resume_clip_run`; (run id, units computed now, units already stored)."""
    from domainbench.engine.dataset_pin import pinned_config
    from domainbench.engine.lifecycle import now, restart_run, stored_run

    say = say or (lambda _m: None)
    run = stored_run(store, run_id)
    if run.kind != CLIP_KIND or run.kind_settings is None:
        raise UserInputError(f"run {run_id} is not a clip run")
    if run.status == "done":
        raise UserInputError(f"run {run_id} is done; read it with `domainbench show {run_id}`")
    check_clip_options(run.domain, run.config, _executor_name(executor))
    ks = run.kind_settings
    queued = run.dataset is None  # checked when it was queued; its clips are decoded and recorded now
    cfg = pinned_config(run.config) if queued else run.config
    s = ks["sampling"]
    inputs = open_inputs(run.domain, cfg, Sampling(s["frames"], s["fps"], s["max_frames"], s["seed"]).check())
    if run.dataset is not None and run.dataset.fingerprint is not None:
        changed = run.dataset.fingerprint.differences(_info(inputs, cfg).fingerprint)  # type: ignore[arg-type]
        if changed:
            raise UserInputError(f"run {run_id} was evaluated on clips {cfg.dataset}, but their {changed} changed; "
                                 "restore the clips or start a new run")
    if not queued and _clips_record(inputs) != ks["clips"]:
        raise UserInputError(f"run {run_id}: the clips decode to other sampled frames than when it started; "
                             "restore the clips or start a new run")
    part = clip_units(store, cfg, inputs.dataset.classes, executor, say)
    try:
        fields: dict[str, Any] = {"resumed_at": now()}
        if queued:  # a queued run starts here: record what a start records
            fields = {"dataset": _info(inputs, cfg), "environment": part.environment(), "config": cfg,
                      "kind_settings": {**ks, "clips": _clips_record(inputs),
                                        "unreadable": [{"clip": c, "why": w} for c, w in inputs.unreadable]}}
        restart_run(store, run_id, **fields)
    except BaseException:
        part.close()
        raise
    computed, skipped = _evaluate(store, run_id, cfg, inputs, part, say)
    return run_id, computed, skipped


@dataclass(frozen=True)
class ClipRunResult:
    run: RunRecord
    rows: list[dict[str, Any]]
    paired: list[dict[str, Any]]
    clips: list[dict[str, Any]]
    units: dict[str, Any]


def is_clip_run(run: RunRecord | None) -> bool:
    return run is not None and run.kind == CLIP_KIND


def load_clip_run(store: Store, run_id: str) -> ClipRunResult:
    from domainbench.engine.lifecycle import stored_run

    run = stored_run(store, run_id)
    if not is_clip_run(run):
        raise UserInputError(f"run {run_id} is not a clip run; read it with `domainbench show {run_id}`")
    ks = run.kind_settings or {}
    if run.status != "done" or "rows" not in ks:
        raise UserInputError(f"run {run_id} is {run.status} and has no results yet; continue it with "
                             f"`domainbench run --resume {run_id}`")
    return ClipRunResult(run, list(ks["rows"]), list(ks.get("paired", [])), list(ks["clips"]), stored_units(store, run))


def strip_frames(run: RunRecord, clip_name: str, corruption: str, severity: int,
                 mode: str | None) -> tuple[np.ndarray, np.ndarray]:
    """One clip's sampled frames, clean and under a cell, as the run saw them (re-decoded from the run's clips and
    corrupted with the run's seed: frames are not stored); for the run page's clip strip."""
    from domainbench.data.clips import decode_clip
    from domainbench.records.label_sets import resolve_classes

    ks = run.kind_settings or {}
    s = ks.get("sampling") or {}
    ds = open_clips(run.config.dataset, resolve_classes(run.config.classes), run.config.image_size)
    clip = next((c for c in ds.clips if c.name == clip_name), None)
    if clip is None:
        raise UserInputError(f"clip {clip_name} is no longer in {run.config.dataset}; restore it to see its frames")
    d = decode_clip(clip, Sampling(s.get("frames"), s.get("fps"), s.get("max_frames"), s.get("seed", 0)),
                    ds.image_size)
    return d.frames, corrupt(ClipCell(corruption, severity, mode), d, run.config.seed)


class ClipKind(SelfRunKind):
    """The registry's entry for clip runs (``engine.kinds``). A clip run starts with :func:`start_clip_run` (the
    CLI's ``run``, ``domainbench.run``) or is queued (``service.launch.enqueue_run``); ``Engine.resume`` (``run
    --resume``, ``domainbench.resume``, a worker's claim) hands the whole resume to :meth:`resume_run` after the
    executor is checked against ``capabilities``: local or Ray."""

    name = CLIP_KIND
    start_hint = "domainbench run PLAN --dataset CLIPS --frames N"
    resume_words = "continue it with"
    capabilities = KindCapabilities(executors=("local", "ray"))

    def resume_run(self, session: RunSession) -> str:
        """The engine's resume of a stored clip run, on the session's executor (a worker's Ray executor included)."""
        assert session.run is not None
        executor = session.executor if getattr(session.executor, "name", "local") == "ray" else "local"
        rid, computed, skipped = continue_clip_run(session.store, session.run.run_id, say=session.events.message,
                                                 executor=executor)
        session.stats.computed_units += computed
        session.stats.skipped_units += skipped
        return rid


register_kind(ClipKind())

__all__ = ["CLIP_KIND", "ClipCell", "ClipKind", "ClipRunResult", "check_clip_inputs", "check_clip_options", "clip_cells", "clip_results",
           "clip_seed", "clip_units", "continue_clip_run", "is_clip_run", "load_clip_run", "refuse_temporal_on_images", "resume_clip_run",
           "score_cell", "start_clip_run", "strip_frames"]
