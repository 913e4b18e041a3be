"""Where a run executes: in this process (``local``) or on a Ray cluster (``ray``); its options.

The options model is declared with the other settings (``domainbench.runtime.settings.ExecutorOptions``);
the environment's choice for a long-running worker is ``Settings.executor_options``.
"""

from __future__ import annotations

from collections.abc import Mapping

from domainbench.runtime.settings import ENV_EXECUTOR, ENV_RAY_ADDRESS, ExecutorKind, ExecutorOptions, Settings


def options_from_env(environ: Mapping[str, str] | None = None) -> ExecutorOptions:
    """The executor a long-running worker uses: $DOMAINBENCH_EXECUTOR and $DOMAINBENCH_RAY_ADDRESS."""
    return Settings.from_env(environ).executor_options()


__all__ = ["ENV_EXECUTOR", "ENV_RAY_ADDRESS", "ExecutorKind", "ExecutorOptions", "options_from_env"]
