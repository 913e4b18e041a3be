"""The FMR section's frames, from hand-made records (no Streamlit)."""

from __future__ import annotations

import numpy as np

from domainbench.fmr.images import from_png_b64, to_png_b64
from domainbench.records.report import FmrModelReport, FmrOracleReport, FmrReport
from domainbench.store.records import FmrUnitRecord
from domainbench.frontend.views.fmr_section import fmr_frame, gallery_rows

CLASSES = ["cat", "dog", "bird"]


def _record() -> FmrUnitRecord:
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 256, size=(3, 20, 20), dtype=np.uint8)
    gen = (255 - clean).astype(np.uint8)
    return FmrUnitRecord(
        run_id="r", model="m", shard=0, search="greedy", seed=0, indices=[4, 5, 6], labels=[0, 1, 2],
        clean_preds=[0, 1, 1], final_preds=[1, 1, 1], validated=[True, True, False], steps=[2, 1, 0],
        oracle_clean=[[0, 0], [1, 1], [1, 2]], oracle_final=[[0, 0], [1, 1], [1, 2]],
        ops=[[("contrast", 0.4), ("gaussian_noise", 0.2)], [("brightness", 0.2)], []],
        images=[to_png_b64(gen[0]), to_png_b64(gen[1]), None], originals=[to_png_b64(clean[0]), to_png_b64(clean[1]), None],
    )


def test_png_payloads_round_trip_exactly() -> None:
    img = np.random.default_rng(1).integers(0, 256, size=(17, 23, 3), dtype=np.uint8)
    assert np.array_equal(from_png_b64(to_png_b64(img)), img)
    grey = img[..., :1]
    assert np.array_equal(from_png_b64(to_png_b64(grey), like=grey.shape), grey)


def test_gallery_rows_pair_originals_with_generated_images_and_votes() -> None:
    items = gallery_rows([_record()], CLASSES, ["embedded:a", "embedded:b"])
    assert [i.index for i in items] == [4, 5]  # the unperturbed image has no payload
    first = items[0]
    assert (first.label, first.clean_pred, first.final_pred, first.flipped) == ("cat", "cat", "dog", True)
    assert first.votes == "embedded:a: cat, embedded:b: cat" and first.ops == "contrast 0.4 → gaussian_noise 0.2"
    assert first.generated.shape == (20, 20) and np.array_equal(first.generated, 255 - first.original)
    assert [i.index for i in gallery_rows([_record()], CLASSES, ["a", "b"], flipped_only=True)] == [4]


def test_fmr_frame_in_percent() -> None:
    f = FmrReport(search="greedy", budget=3, candidates=2, step_size=0.2,
                  oracle=FmrOracleReport(members=["a", "b"], clean_agreement=0.9, member_accuracy={"a": 0.9, "b": 0.8}),
                  models=[FmrModelReport(model="m", n=10, sa=0.8, pa=0.4, fmr=50.0, validation_rate=0.7, mean_steps=1.5,
                                         n_validated=9, n_perturbed=7)])
    row = fmr_frame(f).iloc[0]
    assert (row["SA %"], row["PA %"], row["FMR"], row["validation rate %"]) == (80.0, 40.0, 50.0, 70.0)
