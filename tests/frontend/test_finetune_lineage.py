"""A run that evaluates a ``local:`` fine-tune shows its lineage (base, plan, λ) on the run page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_app import run_page, texts

from domainbench import query
from domainbench.store import Store


def _finetune_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "finetune.json").write_text(json.dumps({
        "base": "embedded:fmnist-plain", "dataset": "sample", "epochs_done": 2, "train_indices": list(range(800)),
        "options": {"lam": 5.0, "trainable": "lora"}}))
    (folder / "plan.toml").write_text('domain = "noisy, blurred product photos"\n')
    return folder


def test_lineage_lines_name_base_plan_and_lambda(tmp_path: Path) -> None:
    ft = _finetune_folder(tmp_path / "ft")
    lines = query.finetune_lineage(["embedded:fmnist-plain", f"local:{ft}", f"local:{tmp_path}"])
    assert lines == [f"local:{ft} is a fine-tune of embedded:fmnist-plain under the plan 'noisy, blurred product photos': "
                     "λ 5, 2 epoch(s), trainable lora, 800 training images of sample"]


def test_the_run_page_shows_a_fine_tunes_lineage(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fe_synthetic as synthetic

    tuned = f"local:{_finetune_folder(tmp_path / 'ft')}"
    monkeypatch.setitem(synthetic.CLEAN_CORRECT, tuned, 9)
    monkeypatch.setitem(synthetic.DROP, tuned, 1)
    synthetic.populate(store, run_id="20250101-000000-ft-abcd", models=["embedded:good", tuned])
    shown = texts(run_page("20250101-000000-ft-abcd").caption)
    from domainbench.frontend.ui import md_escape

    # the caption is markdown: the path's characters come escaped, so they show as written
    assert md_escape(f"{tuned} is a fine-tune of embedded:fmnist-plain under the plan 'noisy, blurred product photos': λ 5") in shown
