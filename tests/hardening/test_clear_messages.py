"""Messages that named the wrong thing (issue 36, "Unclear messages" and item 15's hf-vlm config): each is
one error line that says what is actually wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, save
from domainbench.store import open_store
from tests.cli_runner import run_cli


def _hf_folder(tmp_path: Path, config: bytes) -> str:
    folder = tmp_path / "vlm"
    folder.mkdir()
    (folder / "config.json").write_bytes(config)
    (folder / "processor_config.json").write_text("{}")
    return str(folder)


CASES = {
    "target width nan": (lambda t: ["--adaptive", "--target-width", "nan"], "--target-width: Input should be a finite number"),
    "breaking point nan": (lambda t: ["--breaking-point", "nan"], "finite number"),
    "shift name not ASCII": (lambda t: ["--shift", f"\u00f1={t}"], "ASCII letters"),
    "hf-vlm without a model": (lambda t: ["--models", "hf-vlm:"], "give a model after hf-vlm:"),
    "hf-vlm config not JSON": (lambda t: ["--models", "hf-vlm:" + _hf_folder(t, b"{nope")], "config.json is not JSON"),
    "hf-vlm config without model_type": (lambda t: ["--models", "hf-vlm:" + _hf_folder(t, b'{"a": 1}')],
                                         "names no model_type"),
}
# (HTTP 400 "is not retried", `openai-vlm:m@http://` "names no host" and a password in the URL: test_endpoint_throttling.py)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_message_names_the_real_problem(case: str, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    extra, says = CASES[case]
    plan = save(DomainConfig(domain="d", corruptions=[CorruptionChoice(name="brightness", severities=[1])]),
                tmp_path / "plan.toml")
    args = ["run", str(plan), *extra(tmp_path), "--workers", "0", "--limit", "4"]
    if "--models" not in args:
        args += ["--models", "embedded:fmnist-plain"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, err)
    assert says in lines[0], (case, lines[0])
    assert "less than 1" not in lines[0] and "not available offline" not in lines[0]
    assert open_store().list_runs() == []
