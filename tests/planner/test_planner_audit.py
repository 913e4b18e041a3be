"""Plans people can audit (issue 39, Deliver 5): the provenance a plan records (planner version,
inputs' hashes, LLMs asked) and `plan --explain`: why each corruption is in and notable ones are out."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import numpy as np
import pytest
from planner_fakes import FakeLLM, Reply, answer

import domainbench
from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance, save
from domainbench.planner import audit, plan
from domainbench.planner import photo_fit as pf
from domainbench.planner.settings import LLMSettings
from domainbench.store.repositories import domain_id
from tests.cli_runner import run_cli

XRAY = "Chest X-rays from portable scanners in intensive care."


def sha16(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def test_an_offline_plan_records_version_and_the_text_hash() -> None:
    cfg = plan(XRAY, provider="offline")
    p = cfg.planner
    assert p.planner_version == domainbench.__version__
    assert p.inputs == {"text": sha16(XRAY.encode())}
    assert p.llms == []  # the offline planner asks no LLM


def test_a_plan_made_before_the_audit_fields_dumps_and_hashes_as_before() -> None:
    old = {"domain": "x", "corruptions": [{"name": "brightness", "severities": [1], "reason": "r"}],
           "planner": {"provider": "offline", "model": "m", "created_at": "2026-01-01T00:00:00+00:00"}}
    cfg = DomainConfig.model_validate(old)
    planner_dump = cfg.model_dump(mode="json")["planner"]
    assert not {"planner_version", "inputs", "llms"} & set(planner_dump)
    # the version that made a plan is not part of its id (as its time is not); its inputs are
    stamped = cfg.model_copy(update={"planner": cfg.planner.model_copy(update={"planner_version": "9.9"})})
    assert domain_id(stamped) == domain_id(cfg)
    other = cfg.model_copy(update={"planner": cfg.planner.model_copy(update={"inputs": {"text": "abc"}})})
    assert domain_id(other) != domain_id(cfg)


def test_llm_labels_never_carry_credentials() -> None:
    assert audit.llm_label("gpt-4o", "http://alice:s3cret@llm.local:8000/v1?api_key=k123") == "gpt-4o@llm.local:8000"
    assert audit.llm_label("gpt-4o", None) == "gpt-4o"


def test_every_llm_of_a_vote_is_recorded() -> None:
    servers = [FakeLLM(), FakeLLM()]
    try:
        for srv in servers:
            srv.script = lambda req, n: Reply(content=answer(("brightness", [1]), ("contrast", [1]), ("gaussian_noise", [1])))
        specs = [f"openai:m{i}@{srv.base_url}" for i, srv in enumerate(servers)]
        cfg = plan("Studio photos of shoes.", provider=specs, samples=1,
                   llm=LLMSettings(api_key="sk-test-key-000", timeout=5.0, max_retries=0))
    finally:
        for srv in servers:
            srv.close()
    ports = [srv.base_url.split(":")[2].split("/")[0] for srv in servers]
    assert cfg.planner.llms == [f"m{i}@127.0.0.1:{port}" for i, port in enumerate(ports)]
    assert "sk-test-key-000" not in cfg.model_dump_json()


def test_photo_and_dataset_hashes_follow_the_bytes(tmp_path: Path) -> None:
    from PIL import Image

    clean = pf.probe_clean("sample", n=12)[0]
    folder = tmp_path / "photos"
    folder.mkdir()
    for i, img in enumerate(pf.corrupt_at(clean[:4], "gaussian_noise", 2.6, seed=1)):
        Image.fromarray(np.asarray(img, dtype=np.uint8)).save(folder / f"{i}.png")
    shots, _, files = pf.load_photos(folder, like=clean)
    ref = pf.reference(clean)
    cfg = pf.to_plan(pf.plan_photos(shots, ref, files), ref)
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    assert cfg.planner.inputs["photos"] == h.hexdigest()[:16]
    assert cfg.planner.inputs["dataset"] == audit.digest_pixels(clean) != audit.digest_pixels(clean[1:])
    first = cfg.planner.inputs["photos"]
    (folder / "0.png").write_bytes((folder / "0.png").read_bytes() + b"\0")  # one byte more: another input
    assert audit.digest_files(files) != first


def test_explain_says_why_each_choice_is_in_and_notable_ones_out() -> None:
    cfg = DomainConfig(
        domain=XRAY,
        corruptions=[CorruptionChoice(name="brightness", severities=[1, 2], reason="Required everywhere."),
                     CorruptionChoice(name="gaussian_noise", severities=[2], reason="The description says 'portable'.")],
        planner=PlannerProvenance(provider="openai", model="m", samples=10,
                                  frequencies={"brightness": 1.0, "gaussian_noise": 0.9, "motion_blur": 0.3, "rain": 0.1},
                                  violations=["left out pixelate: no effect on 12 images of sample",
                                              "left out saturate: no effect on 12 images of sample"]),
    )
    ex = audit.explain(cfg)
    assert [(c.name, c.why) for c in ex.chosen] == [("brightness", "Required everywhere."),
                                                    ("gaussian_noise", "The description says 'portable'.")]
    out = {c.name: c.why for c in ex.left_out}
    assert out["pixelate"] == "no effect on 12 images of sample"  # the image fit's reason
    assert out["saturate"].startswith("forbidden: greyscale")  # a rule outranks the fit: it would never be planned
    assert out["motion_blur"] == "chosen by 3 of 10 samples, short of the majority"
    assert out["rain"] == "forbidden: medical imaging (the description mentions 'Chest')"  # the rule, not its 1 vote
    assert out["contrast"].startswith("not chosen: no phrase")  # never voted for, yet every domain can show it
    assert "brightness" not in out and "gaussian_noise" not in out
    prov = dict(ex.provenance)
    assert prov["planner version"].startswith("— (made before") and prov["LLMs asked"] == "none"


def test_plan_explain_on_the_command_line(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli(["plan", XRAY, "--provider", "offline", "-o", str(tmp_path / "p.toml")], capsys, monkeypatch,
                             quiet=False)
    assert code == 0, err
    plan_id = err.split("stored as plan ", 1)[1].split()[0]
    stored = tomllib.loads((tmp_path / "p.toml").read_text())["planner"]
    assert stored["inputs"]["text"] == sha16(XRAY.encode()) and stored["planner_version"] == domainbench.__version__
    outputs = []
    for spec in (str(tmp_path / "p.toml"), plan_id):
        code, out, err = run_cli(["plan", "--explain", spec], capsys, monkeypatch)
        assert code == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1]  # the file and the stored plan explain alike
    assert "in: why each corruption was chosen" in out and "rain" in out and "forbidden" in out
    assert sha16(XRAY.encode()) in out
    code, out, err = run_cli(["plan", "--explain", "no-such-plan"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --explain 'no-such-plan': no such plan file") and err.count("\n") == 1
    code, out, err = run_cli(["plan", "x", "--explain", plan_id], capsys, monkeypatch)
    assert code == 2 and "give it alone" in err


def test_an_old_plan_file_explains(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = DomainConfig(domain="Shoes.", corruptions=[CorruptionChoice(name="brightness", severities=[1], reason="r")])
    save(cfg, tmp_path / "old.toml")
    assert "planner_version" not in (tmp_path / "old.toml").read_text()
    code, out, err = run_cli(["plan", "--explain", str(tmp_path / "old.toml")], capsys, monkeypatch)
    assert code == 0, err
    assert "made before plans recorded" in out
