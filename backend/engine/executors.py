"""Picking the engine for an executor; Ray is imported only for ``--executor ray``.

The options live in ``executor_options`` (the Ray executor reads them too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from domainbench.engine.executor_options import ENV_EXECUTOR, ENV_RAY_ADDRESS, ExecutorKind, ExecutorOptions, options_from_env

if TYPE_CHECKING:
    from domainbench.engine.runner import Engine
    from domainbench.engine.tasks import RunEvents
    from domainbench.store import Store

__all__ = ["ENV_EXECUTOR", "ENV_RAY_ADDRESS", "ExecutorKind", "ExecutorOptions", "make_engine", "options_from_env"]


def make_engine(store: Store, events: RunEvents | None = None, options: ExecutorOptions | None = None) -> Engine:
    """The engine for ``options.kind``; Ray is imported only for the ``ray`` executor."""
    options = options or ExecutorOptions()
    if options.kind == "ray":
        from domainbench.engine.ray_executor import RayEngine

        return RayEngine(store, events, options)
    if options.address is not None:
        from domainbench.errors import UserInputError

        raise UserInputError(f"--address {options.address} is a Ray address: add --executor ray, or leave --address out")
    from domainbench.engine.runner import Engine

    return Engine(store, events)
