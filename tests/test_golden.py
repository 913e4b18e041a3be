"""Golden file: a small run of the bundled sample through the CLI stores exactly what it stored before.

This protects every refactor (namespace, run lifecycle, store, metric registry): the plan below runs
through ``domainbench run``, ``show`` and ``export``, and the stored records (run, domain, units,
stability, threat, report), the printed summary and both exports are compared with
``tests/golden/sample_run.json``:

- integers, strings, booleans and None exactly; the printed summary text exactly;
- floats to 1e-9 relative (plus 1e-12 absolute, for values that are zero up to round-off: a relative
  tolerance cannot compare 0.0 with 1e-17). The run is deterministic on a CPU (seeded corruptions,
  in-process), so the tolerance only absorbs summation order, never a changed number;
- except what comes out of a float32 forward pass, to 1e-5 relative: the PD threat, the stability radii
  and the model's confidences with everything summed from them (calibration sums, ECE, NLL). torch
  computes them in float32, and float32 results move in the 7th digit with the thread count (measured:
  up to 2.4e-7 relative between 1 and 2 threads; float32's epsilon is 1.2e-7) and with the CPU's
  instruction set (measured: up to 2.9e-6 relative for confidences on an AVX-512 EPYC against the file
  written on an AVX2 machine). Predictions, labels and every count stay exact; the fixed-point
  calibration sums (integers at 2**-32 resolution, ``unit_sums``) are compared like the floats they encode.

Fields that describe *when/where* a run happened (timestamps, pid, host, the machine's environment,
elapsed seconds, the package version) are left out: they differ on every run by design.

A change that is meant to change results rewrites the file on purpose:
``DOMAINBENCH_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` (the test then fails once, saying so,
so a rewrite is never silent); review ``git diff tests/golden`` before committing it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import run_cli

GOLDEN = Path(__file__).resolve().parent / "golden" / "sample_run.json"
RUN_ID = "golden"

DOMAIN_TOML = """\
domain = "golden sample: noisy, shaken, badly exposed product photos"

[[corruptions]]
name = "gaussian_noise"
severities = [1, 3]
reason = "sensor noise"

[[corruptions]]
name = "motion_blur"
severities = [2, 5]
reason = "hand shake"

[[corruptions]]
name = "brightness"
severities = [1, 4]
reason = "over-exposure"
"""

# small stability and threat settings keep the run at about 25 s on a 2-core CPU
RUN_TOML = """\
dataset = "sample"
models = ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
limit = 64
seed = 0
device = "cpu"
corrupt_on = "cpu"
workers = 0
stability = true
stability_points = 3
stability_images = 16
threat = true
threat_anchors = 8
"""

#: fields that record when, where or with which build a run happened, not what it computed
VOLATILE = {"created_at", "finished_at", "resumed_at", "computed_at", "elapsed_s", "pid", "host", "environment",
            "domainbench", "queued_at", "worker", "lease_until", "timings",
            "path"}  # the dataset's folder: where this checkout is
#: collections that cache model outputs to save work (not results): their own tests check them
CACHES = {"text_embeddings"}
REL_TOL = 1e-9
ABS_TOL = 1e-12
#: numbers of a float32 forward pass (see the module docstring): every value under one of these keys
FLOAT32_REL_TOL = 1e-5
FLOAT32_KEYS = {"threat", "different_class_threat", "mean_threat", "std_threat", "max_threat", "mean_pd_threat",
                "stability", "stability_link", "divergence_radius", "cosine", "euclidean",
                "confidence", "ece", "nll"}
#: fixed-point integer sums of float32 values (``unit_sums.CalibrationSums``): compared like the floats they encode
FIXED_POINT_SUMS = {"confidence_sum", "nll_sum"}


def _keys(path: str) -> list[str]:
    return [part.split("[", 1)[0] for part in path.split(".")]


def _rel_tol(path: str) -> float:
    return FLOAT32_REL_TOL if FLOAT32_KEYS.intersection(_keys(path)) else REL_TOL


def _without_timings(text: str) -> list[str]:
    """The printed lines without the stage timings block (its seconds differ on every run by design)."""
    lines = text.splitlines()
    if "time per stage (s):" not in lines:
        return lines
    at = lines.index("time per stage (s):")
    end = at + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[:at] + lines[end:]


def _strip(value: Any) -> Any:
    """The content of a record: volatile fields left out, storage encodings decoded (see ``_decoded``)."""
    if isinstance(value, dict):
        decoded = _decoded(value)
        if decoded is not None:
            return decoded
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _decoded(value: dict[str, Any]) -> list[Any] | None:
    """A packed array or a sparse confusion matrix as the plain (dense) list it encodes, else None.

    How a record encodes its numbers is the store's business; the golden file pins the numbers, so a
    change of encoding (dense -> sparse confusion, lists -> packed arrays) is not a change of results.
    """
    from domainbench.records.confusion import SparseConfusion
    from domainbench.records.packed import PackedArray

    if set(value) == {"classes", "index", "count"}:
        return SparseConfusion(value["classes"], _strip(value["index"]), _strip(value["count"])).dense().tolist()
    if set(value) == {"dtype", "n", "zlib"}:
        return PackedArray(packed=value).array.tolist()
    return None


def _cell(text: str) -> Any:
    """A CSV cell as the value it spells: int, float, bool, None (empty) or the string."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _csv_rows(text: str) -> dict[str, Any]:
    reader = csv.DictReader(io.StringIO(text))
    return {"columns": reader.fieldnames, "rows": [{k: _cell(v) for k, v in row.items()} for row in reader]}


def _records(home: Path) -> dict[str, list[Any]]:
    from domainbench.store import open_store
    from domainbench.store.base import COLLECTIONS

    store = open_store(None, home)
    out: dict[str, list[Any]] = {}
    for collection in COLLECTIONS:
        if str(collection) in CACHES:
            continue
        docs = [_unit_content(store, d) if collection == "units" else d.model_dump(mode="json")
                for d in store.find(collection)]
        key = COLLECTIONS[collection]
        out[str(collection)] = sorted((_strip(d) for d in docs), key=lambda d: tuple(str(d.get(f)) for f in key))
    store.close()
    return out


def _unit_content(store: Any, unit: Any) -> dict[str, Any]:
    """A unit with what its corruption drew per image, which the store no longer keeps: it is made again from
    the run's seed (``query.drawn_of``), a storage change like the encodings ``_decoded`` reads."""
    from domainbench.query import drawn_of

    doc = unit.model_dump(mode="json")
    drawn = drawn_of(store.get_run(unit.run_id), unit)
    return {**doc, "params": {**doc["params"], "drawn": drawn}} if drawn else doc


def _differences(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Every place ``actual`` differs from ``expected`` (floats within the tolerance), as JSON paths."""
    if type(expected) is int and type(actual) is int and FIXED_POINT_SUMS.intersection(_keys(path)):
        same = math.isclose(expected, actual, rel_tol=FLOAT32_REL_TOL)
        return [] if same else [f"{path}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, float) and isinstance(actual, float):
        same = math.isclose(expected, actual, rel_tol=_rel_tol(path), abs_tol=ABS_TOL) or (math.isnan(expected) and math.isnan(actual))
        return [] if same else [f"{path}: expected {expected!r}, got {actual!r}"]
    if type(expected) is not type(actual):
        return [f"{path}: expected {type(expected).__name__} {expected!r:.80}, got {type(actual).__name__} {actual!r:.80}"]
    if isinstance(expected, dict):
        diffs = [f"{path}: key {k!r} missing" for k in expected if k not in actual]
        diffs += [f"{path}: unexpected key {k!r}" for k in actual if k not in expected]
        for k in expected:
            if k in actual:
                diffs += _differences(expected[k], actual[k], f"{path}.{k}")
        return diffs
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} entries, got {len(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in _differences(e, a, f"{path}[{i}]")]
    return [] if expected == actual else [f"{path}: expected {expected!r:.200}, got {actual!r:.200}"]


def test_differences_sees_every_kind_of_change() -> None:
    golden = {"a": 1, "b": [0.5, "x", None], "c": {"d": True}, "z": 0.0}
    assert _differences(golden, json.loads(json.dumps(golden))) == []
    assert _differences(golden, {**golden, "b": [0.5 * (1 + 1e-12), "x", None], "z": 1e-15}) == []
    assert _differences(golden, {**golden, "b": [0.5 * (1 + 1e-8), "x", None]}) == [
        f"$.b[0]: expected 0.5, got {0.5 * (1 + 1e-8)!r}"]
    # float32 forward-pass numbers are compared to 1e-5, and only they
    threat = {"mean_threat": 2.0, "x": 2.0}
    assert _differences(threat, {"mean_threat": 2.0 * (1 + 1e-6), "x": 2.0}) == []
    assert len(_differences(threat, {"mean_threat": 2.0 * (1 + 1e-4), "x": 2.0 * (1 + 1e-6)})) == 2
    assert _differences({"records": {"threat": [{"sum": 1.0}]}}, {"records": {"threat": [{"sum": 1.000001}]}}) == []
    unit = {"confidence": [0.5], "accuracy": 0.5, "calibration": {"confidence_sum": [10**9], "count": [7]}}
    assert _differences(unit, {"confidence": [0.5 * (1 + 3e-6)], "accuracy": 0.5,
                               "calibration": {"confidence_sum": [10**9 + 2000], "count": [7]}}) == []
    assert _differences(unit, {"confidence": [0.5 * (1 + 3e-5)], "accuracy": 0.5 * (1 + 1e-8),
                               "calibration": {"confidence_sum": [10**9 + 20000], "count": [8]}}) == [
        f"$.confidence[0]: expected 0.5, got {0.5 * (1 + 3e-5)!r}", f"$.accuracy: expected 0.5, got {0.5 * (1 + 1e-8)!r}",
        "$.calibration.confidence_sum[0]: expected 1000000000, got 1000020000", "$.calibration.count[0]: expected 7, got 8"]
    assert _differences(golden, {**golden, "a": 1.0}) == ["$.a: expected int 1, got float 1.0"]
    assert _differences(golden, {**golden, "c": {"d": 1}}) == ["$.c.d: expected bool True, got int 1"]
    assert _differences(golden, {"a": 1, "b": [0.5, "x"], "c": {"e": True}, "z": 0.0}) == [
        "$.b: expected 3 entries, got 2", "$.c: key 'd' missing", "$.c: unexpected key 'e'"]


def test_cell_reads_what_the_csv_writer_wrote() -> None:
    assert [_cell(t) for t in ("", "True", "False", "64", "0.8904761904761905", "clean")] == [
        None, True, False, 64, 0.8904761904761905, "clean"]


def test_sample_run_matches_the_golden_file(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the printed table must not depend on the terminal
    (tmp_path / "domain.toml").write_text(DOMAIN_TOML)
    (tmp_path / "run.toml").write_text(RUN_TOML)
    code, run_out, err = run_cli(["run", str(tmp_path / "domain.toml"), "--run-config", str(tmp_path / "run.toml"),
                                  "--run-id", RUN_ID], capsys, monkeypatch)
    assert code == 0, err
    code, show_out, err = run_cli(["show", RUN_ID], capsys, monkeypatch)
    assert code == 0, err
    code, show_other, err = run_cli(["show", RUN_ID, "--baseline", "embedded:fmnist-augmented"], capsys, monkeypatch)
    assert code == 0, err
    code, csv_text, err = run_cli(["export", RUN_ID, "--format", "csv"], capsys, monkeypatch)
    assert code == 0, err
    code, json_text, err = run_cli(["export", RUN_ID, "--format", "json"], capsys, monkeypatch)
    assert code == 0, err

    actual = {
        "records": _records(home),
        "run_output": _without_timings(run_out),
        "show": _without_timings(show_out),
        "show_other_baseline": _without_timings(show_other),
        "export_csv": _csv_rows(csv_text),
        "export_json": _strip(json.loads(json_text)),
    }
    if os.environ.get("DOMAINBENCH_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(actual, indent=1, sort_keys=False) + "\n")
        pytest.fail(f"rewrote {GOLDEN}; review `git diff {GOLDEN.parent}` and re-run without DOMAINBENCH_UPDATE_GOLDEN")

    expected = json.loads(GOLDEN.read_text())
    diffs = _differences(expected, actual)
    assert not diffs, f"{len(diffs)} difference(s) from {GOLDEN.name} (first 25):\n" + "\n".join(diffs[:25])
