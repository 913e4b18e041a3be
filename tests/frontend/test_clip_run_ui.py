"""A stored clip run (issue 41) in the UI: its run page shows the rows, the clip strip (clean above corrupted, each
frame's prediction, flips marked) and the prediction timeline, without a traceback."""

from __future__ import annotations

from pathlib import Path

from test_app import app, run_page

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.data.clip_samples import write_sample_clips
from domainbench.data.clips import Sampling
from domainbench.engine.clip_kind import load_clip_run, start_clip_run
from domainbench.engine.clip_output import prediction_rows
from domainbench.store import Store


def test_a_clip_run_page_shows_its_rows_strip_and_timeline(store: Store, tmp_path: Path) -> None:
    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=8, size=32, classes=2, seed=0)
    domain = DomainConfig(domain="flickering lights", corruptions=[CorruptionChoice(name="flicker", severities=[5])])
    cfg = RunConfig(dataset=str(clips), image_size=32, workers=0, models=["embedded:fmnist-plain"])
    rid = start_clip_run(store, domain, cfg, Sampling(frames=4), "clip-ui")
    runs = next(d.value for d in app().dataframe if "progress %" in d.value.columns)
    assert rid in runs["run"].tolist()
    page = run_page(rid)
    assert not page.exception, [e.value for e in page.exception]
    stored = load_clip_run(store, rid)
    rows = next(d.value for d in page.dataframe if "temporal_flip_rate" in d.value.columns)
    assert rows["temporal_flip_rate"].tolist() == [r["temporal_flip_rate"] for r in stored.rows]
    assert not page.info, [i.value for i in page.info]
    images = [e for e in page.main if getattr(e, "type", None) == "image"]
    assert len(images) == 2 * 4  # four sampled frames, clean above corrupted
    captions = [c for el in images for c in (getattr(i, "caption", "") for i in el.proto.imgs)]
    preds = prediction_rows(stored)
    first = sorted(stored.clips[0]["frame_indices"])
    clean = [p for p in preds if p["clip"] == stored.clips[0]["clip"] and p["corruption"] == "clean"]
    assert captions[0] == f"#{first[0]}: {clean[0]['prediction']}"
    flips = [p for p in clean if p["flipped"] == 1]
    assert sum("↯ flip" in c for c in captions[0::2]) == len(flips)
    flickered = [p for p in preds if p["clip"] == stored.clips[0]["clip"] and p["corruption"] == "flicker"]
    for caption, p, c in zip(captions[1::2], flickered, clean):
        assert caption.split(" ")[0] == p["prediction"] and ("≠ clean" in caption) == (p["prediction"] != c["prediction"])
    assert page.get("plotly_chart"), "the prediction timeline"
    # the header counts clips and the (model, cell) units stored: it read "images 2", "evaluated 0 %" and
    # "Run kind: corruption" for a finished clip run
    cards = {m.label: m.value for m in page.metric}
    assert cards["clips"] == "2" and "images" not in cards
    assert cards["evaluated"] == "100 %"
    assert any("Run kind: clips" in c.value for c in page.caption)
    # a clip run has no ratios to a baseline: no mCE baseline picker; a temporal cell's mode is blank, not "None"
    assert not [s for s in page.selectbox if s.label.startswith("baseline")]
    assert "None" not in set(rows["mode"].astype(str)) and set(rows["mode"]) == {""}
