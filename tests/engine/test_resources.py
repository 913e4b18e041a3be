"""What each model costs besides time (issue 40): parameters, peak memory while scoring, an endpoint's requests and
tokens (``engine.resources``), against independent counts: the weights' own tensors, a known allocation, sums by
hand. The endpoint's requests and tokens over an interrupted and resumed run: tests/models/test_openai_vlm.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from domainbench.engine.resources import PeakMemory, record, weights


def test_weights_count_every_parameter_and_buffer_of_the_models_modules_once() -> None:
    from domainbench.models.embedded import EmbeddedModel

    model = EmbeddedModel("fmnist-plain")
    state = model.tower.state_dict()  # parameters and buffers (batch-norm statistics), by name
    assert weights(model) == (sum(t.numel() for t in state.values()),
                              sum(t.numel() * t.element_size() for t in state.values()))
    # a tensor two modules share counts once; an object holding no module holds nothing
    import torch

    shared = torch.nn.Linear(3, 2)
    assert weights(SimpleNamespace(a=shared, b=shared, name="x")) == (8, 32)
    assert weights(SimpleNamespace(name="remote")) is None


@pytest.mark.skipif(not __import__("pathlib").Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
def test_the_host_peak_is_what_a_batch_took_above_the_resident_set_before_it() -> None:
    meter = PeakMemory()
    size = 64 << 20
    with meter.measure("m", "cpu"):
        block = np.ones(size, dtype=np.uint8)  # touched: resident
        del block
    assert meter.where == {"m": "host"}
    assert 0.95 * size <= meter.working["m"] <= 1.5 * size
    with meter.measure("m", "cpu"):
        np.ones(1 << 20, dtype=np.uint8)
    assert meter.working["m"] >= 0.95 * size  # the largest batch's stays


def test_record_sets_fixed_values_keeps_the_larger_peak_and_adds_counts() -> None:
    import torch

    tower = torch.nn.Linear(10, 5)  # 55 float32 parameters: 220 bytes
    local = SimpleNamespace(name="local", model=SimpleNamespace(tower=tower))
    remote = SimpleNamespace(name="remote", model=SimpleNamespace(requests=4, prompt_tokens=400, completion_tokens=12))
    stored = {"local": {"images": 8.0, "parameters": 55.0, "weight_bytes": 220.0, "peak_host_bytes": 5000.0},
              "remote": {"images": 8.0, "requests": 2.0, "prompt_tokens": 150.0, "completion_tokens": 6.0}}
    meter = PeakMemory()
    meter._keep("local", "host", 1000)
    record(stored, [local, remote], meter)
    assert stored["local"] == {"images": 8.0, "parameters": 55.0, "weight_bytes": 220.0, "peak_host_bytes": 5000.0}
    meter._keep("local", "host", 9000)
    record(stored, [local], meter)
    assert stored["local"]["peak_host_bytes"] == 220 + 9000
    assert stored["remote"] == {"images": 8.0, "requests": 6.0, "prompt_tokens": 550.0, "completion_tokens": 18.0}


def test_a_run_stores_each_models_parameters_and_peak_memory(tmp_path) -> None:  # noqa: ANN001
    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
    from domainbench.models.embedded import EmbeddedModel
    from domainbench.store import open_store

    store = open_store(None, tmp_path / "home")
    try:
        cfg = RunConfig(dataset="sample", limit=8, workers=0, stability=False, threat=False)
        run = domainbench.run(DomainConfig(domain="noise", corruptions=[
            CorruptionChoice(name="gaussian_noise", severities=[3])]), run_config=cfg, store=store)
        timings = store.get_run(run.id).timings
    finally:
        store.close()
    for variant in ("fmnist-plain", "fmnist-augmented"):
        row = timings[f"embedded:{variant}"]
        n, size = weights(EmbeddedModel(variant))
        assert (row["parameters"], row["weight_bytes"]) == (n, size)
        assert row["peak_host_bytes"] >= size and "peak_gpu_bytes" not in row
        assert "requests" not in row


def test_on_cuda_the_peak_is_the_allocators_peak_above_what_was_allocated_before(monkeypatch) -> None:  # noqa: ANN001
    """No GPU here: torch.cuda's counters are stood in for, to check which are read and reset, and in which order."""
    import torch

    calls: list[str] = []
    allocated = {"now": 300, "peak": 300}

    def reset(dev) -> None:  # noqa: ANN001
        calls.append("reset")
        allocated["peak"] = allocated["now"]

    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: calls.append("allocated") or allocated["now"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda dev: calls.append("max") or allocated["peak"])
    meter = PeakMemory()
    with meter.measure("m", "cuda:0"):
        allocated["peak"] = 1_300  # a batch's activations: 1,000 bytes above the 300 held before
    assert calls == ["allocated", "reset", "max"]
    assert meter.working == {"m": 1_000} and meter.where == {"m": "gpu"}
