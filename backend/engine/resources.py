"""What each model costs besides time: its parameters, its peak memory while scoring, and an endpoint's requests and
tokens. Stored in the run's ``timings`` beside each model's ``images`` (``RESOURCE_KEYS``), so a run record keeps its
shape and a run without them (older, or on Ray, whose actors are not timed) simply has none.

- ``parameters`` / ``weight_bytes``: the elements and bytes of the parameters and buffers of every torch module the
  model object holds (each tensor once). A backend that keeps part of itself elsewhere (the embedded models' shared
  text tower, a remote endpoint) counts what it holds.
- ``peak_gpu_bytes`` (a model on CUDA) or ``peak_host_bytes`` (on the CPU): its weights plus the most memory one of
  its batches took above what was allocated before it: on CUDA ``torch.cuda.max_memory_allocated`` after
  ``reset_peak_memory_stats``; on the CPU the process's peak resident set (``VmHWM``, reset through
  ``/proc/self/clear_refs``) above its resident set before the batch. Other threads' allocations during the batch
  count too: it is the process's, on the run's machine.
- ``requests``, ``prompt_tokens``, ``completion_tokens``: what an ``openai-vlm:`` model sent (every attempt) and the
  ``usage`` its answers reported (answers from the answer cache cost nothing and count nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: set once per model (the same on a resume)
FIXED_KEYS = ("parameters", "weight_bytes")
#: the largest of every session's
PEAK_KEYS = ("peak_gpu_bytes", "peak_host_bytes")
#: summed over the sessions
COUNT_KEYS = ("requests", "prompt_tokens", "completion_tokens")
RESOURCE_KEYS = FIXED_KEYS + PEAK_KEYS + COUNT_KEYS

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _modules(model: Any) -> list[Any]:
    import torch

    if isinstance(model, torch.nn.Module):
        return [model]
    # a model object without a __dict__ (slots, a Ray actor's handle) holds no modules this process can count
    return [v for v in getattr(model, "__dict__", {}).values() if isinstance(v, torch.nn.Module)]


def weights(model: Any) -> tuple[int, int] | None:
    """(parameter + buffer elements, their bytes) of the torch modules ``model`` holds, each tensor once; None when it
    holds none (a remote model)."""
    seen: dict[int, Any] = {}
    for module in _modules(model):
        for t in (*module.parameters(), *module.buffers()):
            seen.setdefault(id(t), t)
    if not seen:
        return None
    return sum(t.numel() for t in seen.values()), sum(t.numel() * t.element_size() for t in seen.values())


def _kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_host_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")  # 5: reset the peak resident set size to the current one (proc(5))
        return True
    except OSError:
        return False


class PeakMemory:
    """Per model, the most memory one of its batches took above what was allocated before it (bytes)."""

    def __init__(self) -> None:
        self.working: dict[str, int] = {}
        self.where: dict[str, str] = {}

    @contextlib.contextmanager
    def measure(self, name: str, device: Any) -> Iterator[None]:
        import torch

        dev = torch.device(device)
        if dev.type == "cuda":
            before = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            yield
            self._keep(name, "gpu", torch.cuda.max_memory_allocated(dev) - before)
            return
        before = _kib("VmRSS") if _reset_host_peak() else None
        yield
        peak = _kib("VmHWM") if before is not None else None
        if peak is not None:
            self._keep(name, "host", peak - before)  # type: ignore[operator]

    def _keep(self, name: str, where: str, used: int) -> None:
        self.where[name] = where
        self.working[name] = max(self.working.get(name, 0), max(used, 0))


def measured(meter: PeakMemory | None, name: str, device: Any) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if meter is None else meter.measure(name, device)


def record(timings: dict[str, dict[str, float]], models: Iterable[Any], meter: PeakMemory | None) -> None:
    """Write each model's resources (``RESOURCE_KEYS``) into ``timings`` (a ``StageTimes.seconds``, which holds the
    stored values of earlier sessions): fixed ones set, peaks the larger, counts added. ``models``: ``ModelState``s."""
    for ms in models:
        row = timings.setdefault(ms.name, {})
        held = weights(ms.model)
        if held is not None:
            row["parameters"], row["weight_bytes"] = float(held[0]), float(held[1])
        if meter is not None and ms.name in meter.working:
            key = f"peak_{meter.where[ms.name]}_bytes"
            row[key] = max(row.get(key, 0.0), float((held[1] if held else 0) + meter.working[ms.name]))
        for key in COUNT_KEYS:
            n = getattr(ms.model, key, None)
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                row[key] = row.get(key, 0.0) + float(n)
