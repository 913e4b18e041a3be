"""The New domain page through ``AppTest``: plan, edit the plan, launch into the queue, resume;
bad input and a store that is down give a message, never a traceback; no secret is shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance
from domainbench.errors import StoreUnavailableError, UserInputError
from domainbench.planner import MAX_DOMAIN_CHARS
from domainbench.store import Store
from domainbench.store.queue import queue_of
from domainbench.frontend import data

APP = str(Path(__file__).resolve().parents[2] / "frontend" / "app.py")


def texts(elements) -> str:  # noqa: ANN001 - an AppTest element list
    return "\n".join(str(e.value) for e in elements)


def everything(at: AppTest) -> str:
    """Every text the page renders (messages, markdown, captions, tables, widget labels and values)."""
    parts = [texts(getattr(at, kind)) for kind in ("error", "warning", "info", "success", "markdown", "caption",
                                                     "title", "subheader", "code", "exception")]
    parts += [d.value.to_csv() for d in at.dataframe]
    parts += [f"{w.label} {getattr(w, 'value', '')}" for kind in ("text_input", "text_area", "selectbox", "multiselect")
              for w in getattr(at, kind)]
    parts += [str(e.proto) for e in at.sidebar]
    return "\n".join(parts)


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page("views/new_domain.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def fake_plan(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
    return DomainConfig(
        domain=text[:100],
        corruptions=[CorruptionChoice(name="brightness", severities=[1, 2], reason="glare on the windscreen"),
                     CorruptionChoice(name="gaussian_noise", reason="high ISO at night")],
        planner=PlannerProvenance(provider=provider, model="fake", samples=samples,
                                  frequencies={"brightness": 0.8, "gaussian_noise": 1.0, "rotation": 0.1},
                                  created_at="2025-02-01T00:00:00+00:00"),
    )


def planned(monkeypatch: pytest.MonkeyPatch, text: str = "dash-cam footage at night") -> AppTest:
    monkeypatch.setattr(data, "plan_domain", fake_plan)
    at = page()
    at.text_area(key="domain-text").set_value(text)
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception and not at.error, texts(at.error)
    return at


def launch(at: AppTest, **fields: object) -> AppTest:
    for key, value in fields.items():
        widget = at.number_input(key=key) if key == "limit" else at.text_input(key=key)
        widget.set_value(value)
    next(b for b in at.button if b.label == "Launch run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_plan_edit_and_launch_into_the_queue(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = planned(monkeypatch)
    plan_table = next(d.value for d in at.dataframe if "reason" in d.value.columns)
    assert plan_table["corruption"].tolist() == ["brightness", "gaussian_noise"]
    assert len(at.get("plotly_chart")) == 1  # the selection heatmap
    assert len(at.get("image")) == 3  # clean + one row of severities per corruption

    # edit: drop gaussian_noise, add contrast at severities 2 and 4, brightness at 1 only
    at.button(key="rm-gaussian_noise").click().run()
    at.selectbox(key="add-corruption").set_value("contrast").run()
    next(b for b in at.button if b.label == "Add corruption").click().run()
    at.button_group(key="sev-contrast").set_value([2, 4]).run()
    at.button_group(key="sev-brightness").set_value([1]).run()
    assert not at.exception and not at.error, texts(at.error)
    assert len(at.get("image")) == 3  # the preview follows the edited plan

    launch(at, limit=40)
    assert not at.error, texts(at.error)
    assert "Queued run" in texts(at.warning)  # no worker runs here: said, not a green "a worker picks it up"
    queued = [r for r in populated.list_runs() if r.status == "queued"]
    assert len(queued) == 1
    run = queued[0]
    assert [(c.name, c.severities) for c in run.domain.corruptions] == [("brightness", [1]), ("contrast", [2, 4])]
    assert run.config.limit == 40 and run.config.dataset == "sample" and run.queued_at
    assert run.config.models == ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
    assert run.run_id in texts(at.markdown)  # the queue panel lists it

    # the same launch again is refused, naming the queued run
    launch(at)
    assert f"already queued: {run.run_id}" in texts(at.warning)
    assert len([r for r in populated.list_runs() if r.status == "queued"]) == 1


def test_an_fmr_search_is_launched_into_the_queue_like_any_run(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = planned(monkeypatch)
    at.checkbox(key="fmr").check()
    launch(at, **{"fmr-oracle": "embedded:fmnist-plain", "limit": 20})
    assert "at least 2 zero-shot models" in texts(at.error)  # refused on the page, nothing queued
    assert [r for r in populated.list_runs() if r.status == "queued"] == []
    launch(at, **{"fmr-oracle": "embedded:fmnist-plain, embedded:fmnist-augmented"})
    # the tested models are the oracle: said before launch, nothing queued (issue 37, defect 10)
    assert "both tested and in the FMR oracle" in texts(at.warning)
    assert [r for r in populated.list_runs() if r.status == "queued"] == []
    at.checkbox(key="fmr-overlap-ok").check()
    launch(at)
    assert not at.error, texts(at.error)
    (run,) = [r for r in populated.list_runs() if r.status == "queued"]
    assert run.fmr is not None and run.fmr.oracle == ["embedded:fmnist-plain", "embedded:fmnist-augmented"]
    assert run.fmr.budget == 10 and not run.config.stability and not run.config.threat  # FMR measures neither


def test_planned_compositions_are_launched_unless_removed(populated: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.records.config import Composition, CompositionStep

    def with_compositions(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
        steps = [CompositionStep(corruption="brightness", severity=2), CompositionStep(corruption="gaussian_noise", severity=1)]
        return fake_plan(text, provider, samples).model_copy(update={"compositions": [
            Composition(name="glare + noise", steps=steps, reason="night glare"),
            Composition(name="noise then glare", steps=steps[::-1])]})

    monkeypatch.setattr(data, "plan_domain", with_compositions)
    at = page()
    at.text_area(key="domain-text").set_value("dash-cam footage at night")
    next(b for b in at.button if b.label == "Plan").click().run()
    def editor_rows() -> str:
        return texts([m for m in at.markdown if "(one cell, steps in order)" in str(m.value)])

    assert "glare + noise**" in editor_rows() and "noise then glare**" in editor_rows()
    assert "brightness s2 → gaussian\\_noise s1" in editor_rows()
    at.button(key="rm-composition-0").click().run()  # the first one
    assert "glare + noise**" not in editor_rows() and "noise then glare**" in editor_rows()
    launch(at, limit=20)
    assert not at.error, texts(at.error)
    (run,) = [r for r in populated.list_runs() if r.status == "queued"]
    assert [c.name for c in run.domain.compositions] == ["noise then glare"]
    assert [(c.name, c.severities) for c in run.domain.corruptions] == [("brightness", [1, 2]), ("gaussian_noise", [1, 2, 3, 4, 5])]


def test_a_severity_less_corruption_blocks_the_launch(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = planned(monkeypatch)
    at.button_group(key="sev-brightness").set_value([]).run()
    assert "brightness: choose at least one severity" in texts(at.error)
    assert not [b for b in at.button if b.label == "Launch run"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"dataset": "/no/such/folder"}, "dataset path /no/such/folder does not exist"),
    ({"extra-models": "embedded:fmnist-plian"}, "unknown model 'embedded:fmnist-plian'"),
    ({"extra-models": "nosuchprefix:x"}, "a model name is PREFIX:NAME"),
    ({"baseline": "open_clip:ViT-B-32/openai"}, "baseline 'open_clip:ViT-B-32/openai' is not one of the chosen models"),
])
def test_launch_inputs_are_checked_before_anything_is_queued(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                             fields: dict[str, str], message: str) -> None:
    at = launch(planned(monkeypatch), **fields)
    assert message in texts(at.error) and "Nothing was queued" in texts(at.error)
    assert store.list_runs() == []


def test_empty_and_huge_descriptions(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page()
    at.text_area(key="domain-text").set_value("   ")
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception and "description is empty" in texts(at.error)

    huge = ("Night-time dash-cam footage with rain on the lens and glare from headlights. " * 2700)[:200_000]
    at = planned(monkeypatch, huge)
    note = texts(at.warning)
    assert "200,000 characters" in note and "reads only the first" in note
    kept = int(note.split("reads only the first ")[1].split(" ")[0].replace(",", ""))
    assert MAX_DOMAIN_CHARS // 2 < kept <= MAX_DOMAIN_CHARS


def test_interrupted_runs_can_be_resumed_from_the_page(store: Store) -> None:
    import fe_synthetic as syn

    syn.populate(store, run_id="r-stopped", status="interrupted", skip_cells=3)
    syn.populate(store, run_id="r-done", created_at="2025-01-02T00:00:00+00:00")
    store.update_run("r-done", queued_at="2025-01-02T00:00:00+00:00")
    at = page()
    assert [b.key for b in at.button if b.label == "Resume"] == ["resume-r-stopped"]  # not the finished one
    at.button(key="resume-r-stopped").click().run()
    assert not at.exception and not at.error, texts(at.error)
    run = store.get_run("r-stopped")
    assert run.status == "queued" and run.queued_at and run.worker is None
    assert queue_of(store).claim("w", 30).run_id == "r-stopped"  # type: ignore[union-attr]


def test_a_store_that_is_down_is_a_message(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("not a directory")  # $DOMAINBENCH_HOME is a file: the store cannot open
    at = page()
    assert "opening the results store" in texts(at.error) and "is a file" in texts(at.error)
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception
    assert "needs the results store" in texts(at.error)


def test_no_api_key_or_database_password_is_ever_rendered(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    key, password = "sk-live-4f9a8c7e6d5b", "hunter2-pw-77"
    uri = f"mongodb://admin:{password}@db.example:27017/domainbench"
    monkeypatch.setenv("DOMAINBENCH_LLM_API_KEY", key)

    def leaky_plan(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
        raise UserInputError(f"the endpoint refused the key {key} (HTTP 401)")

    monkeypatch.setattr(data, "plan_domain", leaky_plan)
    at = page()
    next(b for b in at.button if b.label == "Plan").click().run()
    assert "refused the key ***" in texts(at.error)
    assert key not in everything(at)

    # a store whose error quotes its URI: the page shows it with the password replaced
    monkeypatch.setenv("DOMAINBENCH_MONGO_URI", uri)
    import domainbench.frontend.ui as ui
    def down(uri_: str | None, home: Path) -> Store:
        raise StoreUnavailableError(f"cannot reach {uri_}")

    monkeypatch.setattr(ui, "open_store", down)
    ui._cached_store.clear()
    for view in (None, "views/compare.py", "views/new_domain.py"):
        at = AppTest.from_file(APP, default_timeout=90).run()
        if view:
            at.switch_page(view).run()
        assert not at.exception
        shown = everything(at)
        assert "mongodb://admin:***@db.example" in shown, shown
        assert password not in shown and key not in shown


def test_new_domain_page_plans_for_the_given_dataset(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the dataset, the planner leaves out what does not change its images and the page says which."""
    def plan(text: str, provider: str = "offline", samples: int = 10) -> DomainConfig:
        return DomainConfig(domain=text, corruptions=[CorruptionChoice(name="saturate", severities=[1, 2]),
                                                      CorruptionChoice(name="gaussian_noise", severities=[1])])

    monkeypatch.setattr(data, "plan_domain", plan)
    at = page()
    at.text_input(key="plan-dataset").set_value("sample")
    next(b for b in at.button if b.label == "Plan").click().run()
    assert not at.exception and not at.error, texts(at.error)
    assert "left out saturate: no effect on 6 images of sample[:6]" in texts(at.warning)
    assert [c.name for c in at.session_state["planned_domain"].corruptions] == ["gaussian_noise"]


def test_a_clip_folder_is_launched_as_a_clip_run_with_its_frames_per_clip(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    from domainbench.data.clip_samples import write_sample_clips

    clips = write_sample_clips(tmp_path / "clips", per_class=1, frames=4, size=32, classes=2, seed=0)
    at = planned(monkeypatch)
    at.number_input(key="clip-frames").set_value(3)
    launch(at, dataset=str(clips))  # the image limit (200) stays at its default: it does not apply to clips
    assert not at.error, texts(at.error)
    (run,) = [r for r in store.list_runs() if r.status == "queued"]
    assert run.kind == "clip" and run.kind_settings == {"sampling": {"frames": 3, "fps": None, "max_frames": None,
                                                                     "seed": 0}}
    assert run.config.limit is None and run.config.dataset == str(clips.resolve())
    assert data.runs_frame(store).set_index("run").loc[run.run_id, "kind"] == "clips"
