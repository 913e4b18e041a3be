"""New domain plans with several planners voting and with uploaded deployment photos (issue 39, Deliver 3
and 4 on the page): the agreement table, the photos' measurement in the plan, bad uploads as a message."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.errors import UserInputError
from domainbench.frontend import data, launching
from domainbench.planner import photo_fit as pf
from domainbench.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "planner"))
from planner_fakes import FakeLLM, Reply, answer  # noqa: E402

from tests.frontend.test_new_domain import page, texts  # noqa: E402


def png(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.asarray(img, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def test_voting_planners_on_the_page_show_who_chose_what(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    base = (("brightness", [1]), ("contrast", [1]), ("gaussian_noise", [1]))
    servers = [FakeLLM(), FakeLLM()]
    servers[0].script = lambda req, n: Reply(content=answer(*base, ("motion_blur", [1, 2])))
    servers[1].script = lambda req, n: Reply(content=answer(*base, ("motion_blur", [1]), ("pixelate", [1])))
    monkeypatch.setenv("DOMAINBENCH_LLM_API_KEY", "sk-test-key-000")
    try:
        at = page()
        at.text_area(key="domain-text").set_value("Studio photos of shoes for an online catalogue.")
        at.text_area(key="plan-voters").set_value("\n".join(f"openai:m{i}@{s.base_url}" for i, s in enumerate(servers)))
        next(b for b in at.button if b.label == "Plan").click().run()
    finally:
        for s in servers:
            s.close()
    assert not at.exception and not at.error, texts(at.error)
    cfg = at.session_state["planned_domain"]
    assert cfg.planner.provider == "council" and len(cfg.planner.llms) == 2
    table = next(d.value for d in at.dataframe if "planner" in d.value.columns)
    assert list(table["planner"]) == ["offline", *(f"m{i}@{s.base_url}" for i, s in enumerate(servers))]
    m1 = f"m1@{servers[1].base_url}"
    assert "pixelate" in table.set_index("planner").loc[m1, "chose"]
    # pixelate: one of three planners -> out; the Jaccard cells equal the notes' values
    assert "pixelate" not in {c.name for c in cfg.corruptions}
    assert "sk-test-key-000" not in "\n".join(d.value.to_csv() for d in at.dataframe) + texts(at.warning)


def test_plan_notes_split_the_vote_from_the_other_notes() -> None:
    from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance

    notes = ["planners voting: 2 (a, b); a corruption is chosen by more than half of them",
             "a chose: brightness, fog", "b chose: brightness", "agreement a vs b: Jaccard 0.50",
             "c left out of the vote: timed out"]
    cfg = DomainConfig(domain="x", corruptions=[CorruptionChoice(name="brightness", severities=[1])],
                       planner=PlannerProvenance(provider="council", violations=notes))
    table, rest = launching.plan_notes(cfg)
    assert table.to_dict("records") == [
        {"planner": "a", "chose": "brightness, fog", "Jaccard with a": "—", "Jaccard with b": "0.50"},
        {"planner": "b", "chose": "brightness", "Jaccard with a": "0.50", "Jaccard with b": "—"}]
    assert rest == [notes[0], notes[4]]
    single = cfg.model_copy(update={"planner": PlannerProvenance(provider="offline", violations=["n"])})
    assert launching.plan_notes(single) == (None, ["n"])


def test_uploaded_photos_are_measured_into_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pf, "REFERENCE_IMAGES", 24)
    shots = pf.corrupt_at(pf.probe_clean("sample", n=12, offset=500)[0], "gaussian_noise", 2.6, seed=3)
    uploads = [("same.png", png(s)) for s in shots] + [("broken.jpg", b"not an image")]
    cfg, skipped = launching.photo_plan(None, uploads, "")
    noise = next(c for c in cfg.corruptions if c.name == "gaussian_noise")
    assert noise.reason.startswith("Measured in the deployment photos") and noise.severities in ([2, 3], [3])
    assert skipped == ["skipped 012-broken.jpg: not a decodable image (UnidentifiedImageError)"]
    assert set(cfg.planner.inputs) == {"photos", "dataset"}
    with pytest.raises(UserInputError) as e:
        launching.photo_plan(None, [("a.png", b"junk")], "")
    assert str(e.value).startswith("the uploaded photos: none of its 1 image files could be decoded")
    assert "domainbench-photos-" not in str(e.value)
