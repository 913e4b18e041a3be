"""`domainbench run --models hf-vlm:FOLDER,embedded:fmnist-plain` end to end on the bundled sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domainbench.config import CorruptionChoice, DomainConfig, save
from domainbench.data import open_dataset
from domainbench.models.generative import DEFAULT_QUESTION, softmax_confidence
from domainbench.store import open_store
from tests.cli_runner import run_cli
from tests.models.test_hf_vlm import plain_scores
from tests.models.tiny_vlms import save_tiny_llava

LIMIT = 4


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llava(tmp_path_factory.mktemp("vlm") / "llava")


def test_run_scores_the_sample_as_the_contract_says(llava: Path, home: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    name = f"hf-vlm:{llava}"
    code, out, err = run_cli(["run", str(domain), "--models", f"{name},embedded:fmnist-plain", "--limit", str(LIMIT),
                              "--workers", "0", "--no-stability", "--no-threat", "--batch-size", "3"],
                             capsys, monkeypatch)
    assert code == 0, err
    store = open_store()
    units = {(u.model, u.corruption): u for u in store.find("units")}
    assert set(units) == {(m, c) for m in (name, "embedded:fmnist-plain") for c in ("clean", "brightness")}

    ds = open_dataset("sample").subset(LIMIT)
    batch = ds.load(np.arange(LIMIT))
    rgb = np.repeat(batch.images[..., None], 3, axis=-1) if batch.images.ndim == 3 else batch.images
    ref = plain_scores(llava, rgb, ds.classes, DEFAULT_QUESTION)
    clean = units[(name, "clean")]
    assert np.asarray(clean.preds).tolist() == ref.argmax(axis=1).tolist()
    assert clean.vlm is not None and clean.vlm.unparsed == 0
    np.testing.assert_allclose(np.asarray(clean.confidence, dtype=float), softmax_confidence(ref), atol=1e-5)
    corrupted = units[(name, "brightness")]
    assert corrupted.n == LIMIT and corrupted.vlm is not None and len(corrupted.confidence) == LIMIT
    assert corrupted.flips == sum(a != b for a, b in zip(corrupted.preds, clean.preds))
    assert units[("embedded:fmnist-plain", "clean")].vlm is None  # dual encoders store nothing new
    assert name in out  # the report lists the generative model beside the contrastive one


def test_bad_vlm_flags_are_one_line_errors(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    domain = save(DomainConfig(domain="vlm e2e", corruptions=[CorruptionChoice(name="brightness", severities=[5])]),
                  tmp_path / "plan.toml")
    code, _, err = run_cli(["run", str(domain), "--models", "embedded:fmnist-plain", "--vlm-score", "max"],
                           capsys, monkeypatch)
    assert code == 2 and "--vlm-score" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["run", str(domain), "--models", f"hf-vlm:{tmp_path / 'missing'}"], capsys, monkeypatch)
    assert code == 2 and "hf-vlm:" in err and len(err.strip().splitlines()) == 1
    assert open_store().find("runs") == []
