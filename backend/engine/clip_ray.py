"""Clip runs on the Ray executor: each (model, cell) unit of a clip run (``engine.clip_kind``) scored by an actor.

The driver decodes the clips (``clip_kind.open_inputs``) and puts them into Ray's object store once. Each cell
that still lacks a unit is corrupted by one Ray task (``clip_kind.corrupt``, the local executor's code, with the
run's per-clip seeds), and each of its missing units is one call to a ``ClipActor`` of the unit's model group
(``RayExecutor.start_actors``), which scores the cell's frames with ``clip_kind.score_cell``, the local unit code
(handed to the actors, which Ray does by its import path: this module imports nothing of ``clip_kind``).
The actors hand the unit back and the driver stores it as it arrives, so a run stores the same units on either
executor and a lost actor loses only its calls in flight (``run --resume`` continues on either executor).

Imported only for ``--executor ray``.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from pydantic import SecretStr

from domainbench.data.clips import DecodedClip
from domainbench.engine.clip_scoring import ClipCell, Scored, Todo, corrupt
from domainbench.engine.executor_options import ExecutorOptions
from domainbench.engine.local_executor import local_environment
from domainbench.engine.ray_executor import RayExecutor, actor_store, import_modules
from domainbench.engine.scoring import ModelState, load_models
from domainbench.engine.tasks import SilentEvents
from domainbench.records.config import RunConfig
from domainbench.store import Store


class ClipActor:
    """Holds a group of a clip run's models; scores one (model, cell) unit per call."""

    def __init__(self, store: SecretStr, cfg: dict[str, Any], classes: list[str], modules: list[str],
                 score: Callable[[ModelState, list[np.ndarray]], dict[str, Any]], models: list[str],
                 fence: tuple[str, str, int | None] | None = None) -> None:
        import_modules(modules)
        self.store_uri, self.fence = store, fence
        self.score_cell = score  # clip_kind.score_cell, the local executor's unit code
        self.cfg = RunConfig.model_validate(cfg)
        self.classes = classes
        self.model_names = models
        self.models: dict[str, ModelState] = {}

    def load(self) -> dict[str, Any]:
        """Load this actor's models (classifiers from the store's text-embedding cache, as the local run's are);
        the environment as the run records it."""
        store = actor_store(self.store_uri, self.fence)
        loaded = load_models(self.model_names, self.classes, self.cfg.device, self.cfg.batch_size, self.cfg.templates,
                             options=self.cfg.model_args, cache=store)
        self.models = {m.name: m for m in loaded}
        return {**local_environment(loaded), "host": platform.node(), "pid": os.getpid()}

    def score(self, model: str, frames: list[np.ndarray]) -> dict[str, Any]:
        if not self.models:
            self.load()  # a restarted actor: Ray re-ran __init__ only
        return self.score_cell(self.models[model], frames)


def _corrupt_cell(cell: ClipCell, clips: list[DecodedClip], seed: int, modules: list[str]) -> list[np.ndarray]:
    """One cell's frames of every clip, as a Ray task: the same ``corrupt`` the local executor runs."""
    from domainbench.engine.jobs import init_worker

    init_worker()
    import_modules(modules)
    return [corrupt(cell, c, seed) for c in clips]


class _Said(SilentEvents):
    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def message(self, text: str) -> None:
        self.say(text)


class ClipUnitsOnRay:
    """``clip_kind.ClipUnits`` on Ray: actors over groups of the run's models, loaded when this is made."""

    def __init__(self, store: Store, cfg: RunConfig, classes: list[str], executor: Any,
                 say: Callable[[str], None], score: Callable[[ModelState, list[np.ndarray]], dict[str, Any]]) -> None:
        if isinstance(executor, RayExecutor):  # a worker's (or the engine's) executor, already made
            self.executor = executor
        else:
            options = executor if isinstance(executor, ExecutorOptions) else ExecutorOptions(kind="ray")
            self.executor = RayExecutor(options, _Said(say))
        ex = self.executor
        modules = list(ex.options.modules)
        ex.start_actors(store, cfg, ex.events, ClipActor, "clip corruption tasks",
                        lambda uri, group, _first, fence: (uri, cfg.model_dump(mode="json"), list(classes), modules,
                                                           score, group, fence))

    def environment(self) -> dict[str, Any]:
        return self.executor.environment()

    def units(self, run_id: str, todo: Todo, clips: list[DecodedClip], seed: int) -> Iterator[Scored]:
        ex = self.executor
        ray, opts = ex.ray, ex.options
        corrupt_task = ray.remote(_corrupt_cell).options(num_cpus=opts.cpus_per_task)
        clips_ref = ray.put(clips)  # decoded once, read by every cell's corruption task
        modules = list(opts.modules)
        pending: dict[Any, tuple[int, str, ClipCell]] = {}  # unit result -> (actor index, model, cell)
        load = [0] * len(ex.actors)

        def collect() -> Scored:
            (_, name, cell), scored = ex.ready(pending, load, run_id, "run")
            return name, cell, scored

        for cell, names in todo:
            frames = corrupt_task.remote(cell, clips_ref, seed, modules)  # once per cell, for every model group
            for name in names:
                group = ex.groups[ex.group_of[name]]
                while min(load[i] for i in group) >= opts.shards_in_flight:
                    yield collect()
                i = min(group, key=lambda a: load[a])
                pending[ex.actors[i].score.remote(name, frames)] = (i, name, cell)
                load[i] += 1
        while pending:
            yield collect()

    def close(self) -> None:
        self.executor.release()


__all__ = ["ClipActor", "ClipUnitsOnRay"]
