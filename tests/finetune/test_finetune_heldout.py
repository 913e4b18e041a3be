"""The paper's claims at small scale (stability paper §6, Fig. 7): on held-out images only, fine-tuning the
embedded model under a noise-and-blur plan lowers DivergenceRadius and raises corrupted accuracy, and clean
accuracy is not significantly lower."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from domainbench import api

PLAN = """domain = "noisy, blurred product photos"

[[corruptions]]
name = "gaussian_noise"
severities = [3, 4, 5]

[[corruptions]]
name = "gaussian_blur"
severities = [3, 4, 5]
"""


def test_heldout_evaluation_shows_the_papers_direction(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    out = tmp_path / "ft"
    api.finetune("embedded:fmnist-plain", plan, "sample", out, epochs=2, batch_size=64, lr=1e-3, lam=1.0, image_size=28)
    run = api.finetune_evaluate(out, store=tmp_path / "store", stability_images=32)

    # held-out only: the manifest lists exactly the split's other part, no training image
    state = json.loads((out / "finetune.json").read_text())
    with (out / "heldout" / "manifest.csv").open() as f:
        listed = sorted(int(Path(r["path"]).stem) for r in csv.DictReader(f))
    assert listed == state["heldout_indices"] and not set(listed) & set(state["train_indices"])
    assert len(listed) == 200

    base, tuned = "embedded:fmnist-plain", f"local:{out.resolve()}"
    radius = {(s.model, s.corruption): s.divergence_radius for s in run.report.stability}
    for corruption in ("gaussian_noise", "gaussian_blur"):
        assert radius[(tuned, corruption)] < radius[(base, corruption)], corruption
    summary = run.summary().set_index("model")
    b, t = summary.loc[base], summary.loc[tuned]
    # corrupted accuracy rises: the fine-tuned model's interval lies above the base's point estimate
    assert t["mean_corrupted_accuracy_ci_low"] > b["mean_corrupted_accuracy"]
    # clean accuracy is not significantly lower: the base's point estimate lies inside the tuned model's interval or below it
    assert t["clean_accuracy_ci_high"] >= b["clean_accuracy"]
