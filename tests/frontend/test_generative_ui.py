"""Generative models in the UI: their kind beside contrastive ones, and their own answers in the drill-down."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_app import run_page, summary_table

from domainbench.frontend import data
from domainbench.frontend.ui import md_escape
from domainbench.records.model_backends import kind_of
from domainbench.store import open_store
from domainbench.store.records import VLMUnitExtras


def test_kind_follows_the_model_name() -> None:
    assert kind_of("hf-vlm:llava-hf/llava-1.5-7b-hf") == kind_of("openai-vlm:llava@http://127.0.0.1:11434/v1") \
        == "generative"
    assert {kind_of(m) for m in ("open_clip:ViT-B-32/openai", "hf:google/siglip-base-patch16-224", "local:/m",
                                 "embedded:fmnist-plain")} == {"contrastive"}


@pytest.mark.parametrize("name", ["hf-vlm:/data/models/tiny-llava", "hf-vlm:llava-hf/llava-1.5-7b-hf",
                                  "openai-vlm:llava@http://127.0.0.1:11434/v1"])
def test_new_domain_accepts_generative_model_names(name: str) -> None:
    from domainbench.service.launch import check_model_name

    check_model_name(name)  # a saved folder, a hub id or an endpoint: the worker that loads it reports what lacks


def test_compare_ranking_marks_each_models_kind() -> None:
    frame = pd.DataFrame([{"model": m, "group": "d", "domain_id": "d", "baseline": "embedded:fmnist-plain", "acc": a,
                           "mean_corrupted_acc": c, "mce": 1.0}
                          for m, a, c in (("hf-vlm:tiny", 0.9, 0.7), ("embedded:fmnist-plain", 0.8, 0.75))])
    ranking = data.ranking_frame(frame)
    assert dict(zip(ranking["model"], ranking["kind"])) == {"hf-vlm:tiny": "generative",
                                                           "embedded:fmnist-plain": "contrastive"}


@pytest.fixture
def answered(real_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the real run in which one model's units of gaussian_noise@5 carry free answers, the
    first of them naming no class (prediction -1), as a generative model's generate mode stores them."""
    home, run_id = real_run
    shutil.copytree(home, tmp_path / "home")
    monkeypatch.setenv("DOMAINBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    store = open_store()
    for u in store.units(run_id, model="embedded:fmnist-plain", corruption="gaussian_noise", severity=5):
        preds = np.asarray(u.preds, dtype=np.int64).copy()
        if u.shard == 0:
            preds[0] = -1
        answers = [f"it looks like a *{i}* [link](http://x)" for i in u.indices]
        store.units.put(u.model_copy(update={"preds": preds, "vlm": VLMUnitExtras(answers=answers, unparsed=1)}))
    store.close()
    return run_id


def test_the_drill_down_shows_a_generative_answer_literally(answered: str) -> None:
    store = open_store()
    preds = data.cell_predictions(store, store.get_run(answered), "gaussian_noise", 5)
    plain = preds[preds["model"] == "embedded:fmnist-plain"]
    assert plain["answer"].tolist()[0] == f"it looks like a *{plain['index'].iloc[0]}* [link](http://x)"
    assert plain["pred"].iloc[0] == data.NO_CLASS  # never the last class, as classes[-1] would say
    assert preds[preds["model"] == "embedded:fmnist-augmented"]["answer"].isna().all()

    at = run_page(answered, "Gallery")
    at.selectbox(key=f"gallery-cell-{answered}").set_value(("gaussian_noise", 5)).run()
    at.radio(key=f"gallery-only-{answered}").set_value("all").run()
    assert not at.exception and not at.error
    shown = "\n".join(m.value for m in at.markdown)
    first = int(plain["index"].iloc[0])
    assert f"answer: “{md_escape(f'it looks like a *{first}* [link](http://x)')}”" in shown
    assert f"**{md_escape(data.NO_CLASS)}**" in shown
    assert summary_table(at)["kind"].tolist() == ["contrastive", "contrastive"]
