"""domainbench: planner, models, data, engine, metrics, store and the CLI; ``domainbench.corruptions``,
``domainbench.frontend`` and ``domainbench.prompts`` below it.

The Python API (``domainbench.api``, docs/python-api.md) is read from here::

    import domainbench
    run = domainbench.run(domainbench.plan("dash-cam footage at night", provider="offline"), limit=200)
    run.summary(); run.to_pandas(); domainbench.load_run(run.id); domainbench.compare([run.id])
    domainbench.list_models("embedded:*"); domainbench.list_corruptions("*blur*")

Importing the package imports none of it: ``domainbench.api`` is imported when one of its names is
first read (PEP 562), and its functions import the engine, torch and the models only when they need
them. Importing it changes nothing process-wide either: the host-memory settings
(``host_memory.configure``) are applied by the entry points (the CLI, the UI, corruption worker processes).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("domainbench")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from domainbench.api import (Run, check, compare, finetune, finetune_resume, list_corruptions, list_models, list_runs,
                                 load_plan, load_run, plan, resume, run)

#: the names ``domainbench`` lends from ``domainbench.api``
API = ("Run", "check", "compare", "finetune", "finetune_resume", "list_corruptions", "list_models", "list_runs", "load_plan",
       "load_run", "plan", "resume", "run")

__all__ = ["__version__", *API]


def __getattr__(name: str) -> Any:
    if name in API:
        from domainbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'domainbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
