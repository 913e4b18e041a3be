"""New domain: describe a setting, let the planner choose corruptions, preview them, launch a run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from backend.config import DomainConfig
from backend.engine.status import run_status
from frontend import data, figures
from frontend.ui import error_text, get_store, guard, sidebar_store

EXAMPLE = ("Product photos of clothing taken with cheap phone cameras in a dim warehouse: images are noisy, "
           "blurred by hand shake and heavily JPEG-compressed.")
RUNS_PAGE = str(Path(__file__).resolve().parent / "runs.py")


@st.cache_data(show_spinner=False, max_entries=256)
def cached_gallery(index: int, name: str) -> list[np.ndarray]:
    return data.gallery(data.preview_image(index), name)


@st.cache_data(show_spinner=False)
def cached_models() -> list[str]:
    return data.known_models()


def plan_form() -> None:
    with st.form("plan-form"):
        text = st.text_area("Describe where your images come from and how they get worse", value=EXAMPLE, height=110)
        c1, c2 = st.columns(2)
        provider = c1.radio("planner", ["offline", "auto", "openai"], horizontal=True,
                            help="offline: a local sentence-embedding planner, no network. openai: any OpenAI-compatible "
                                 "endpoint configured by DOMAINBENCH_LLM_BASE_URL / DOMAINBENCH_LLM_API_KEY. auto: openai "
                                 "when configured, else offline.")
        samples = c2.number_input("samples (majority vote over planner runs)", min_value=1, max_value=50, value=10)
        go = st.form_submit_button("Plan", type="primary")
    if go:
        with st.spinner("planning… (the first plan loads the planner's model)"):
            try:
                cfg = data.plan_domain(text, provider=provider, samples=int(samples))
                path = data.save_domain(get_store(), cfg)
            except Exception as e:  # planner / network / validation: a message, not a traceback
                st.error(f"Planning failed — {error_text(e)}")
                return
        st.session_state["planned_domain"] = cfg
        st.session_state["plan_path"] = str(path)


def show_plan(cfg: DomainConfig, path: str) -> None:
    st.subheader(f"Chosen corruptions ({len(cfg.corruptions)})")
    prov = cfg.planner
    st.caption(f"planner {prov.provider} · {prov.model or 'no model'} · {prov.samples} sample(s) · prompt "
               f"{prov.prompt_version or '?'} · config saved to `{path}`")
    rows = []
    for c in cfg.corruptions:
        try:
            family = data.corruption_info(c.name)["family"]
        except ValueError:
            family = "?"
        rows.append({"corruption": c.name, "family": family, "severities": ", ".join(map(str, c.severities)),
                     "selected %": 100.0 * prov.frequencies.get(c.name, 1.0), "reason": c.reason})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"selected %": st.column_config.ProgressColumn("selected %", min_value=0, max_value=100,
                                                                               format="%.0f%%")})
    for v in prov.violations:
        st.warning(v)
    with guard("drawing the selection heatmap"):
        freq = data.selection_frequencies(get_store(), extra=cfg)
        st.plotly_chart(figures.selection_heatmap(freq, highlight=freq.columns[0] if len(freq.columns) else None),
                        width="stretch")
        st.caption("Columns: this plan (outlined) and the other stored domains. A cell is the share of planner "
                   "samples that chose the corruption; the majority vote keeps those chosen in most samples.")


def gallery_section(cfg: DomainConfig) -> None:
    st.subheader("Preview on a sample image")
    with guard("preparing the preview"):
        _, classes, labels = data.sample_images()
        first = {c: int(np.flatnonzero(labels == i)[0]) for i, c in enumerate(classes) if (labels == i).any()}
        cls = st.selectbox("sample image", list(first), key="gallery-class")
        index = first[cls]
        st.image(data.preview_image(index), caption="clean", width=112)
        for c in cfg.corruptions:
            with guard(f"previewing {c.name}"):
                images = cached_gallery(index, c.name)
                st.markdown(f"**{c.name}** — severities 1–5 (evaluated: {', '.join(map(str, c.severities))})")
                st.image(images, caption=[f"s{s}" + ("" if s in c.severities else " (not run)") for s in range(1, 6)],
                         width=112)


def launch_form(cfg: DomainConfig, path: str) -> None:
    st.subheader("Launch a run")
    known: list[str] = []
    with guard("listing models"):
        known = cached_models()
    defaults = [m for m in ("embedded:fmnist-plain", "embedded:fmnist-augmented") if m in known]
    with st.form("launch-form"):
        models = st.multiselect("models", known, default=defaults)
        extra = st.text_input("more models (comma-separated names, e.g. open_clip:ViT-B-32/openai)", "")
        c1, c2, c3 = st.columns(3)
        dataset = c1.text_input("dataset", "sample", help="`sample`, a folder of class folders, a CSV manifest, or an "
                                                          "image folder")
        limit = c2.number_input("image limit (0 = all)", min_value=0, value=200, step=50)
        device = c3.selectbox("device", ["auto", "cpu", "cuda"])
        c4, c5 = st.columns(2)
        stability = c4.checkbox("measure embedding stability", value=True)
        threat = c5.checkbox("measure PD threat", value=True)
        go = st.form_submit_button("Launch run", type="primary")
    if not go:
        return
    chosen = models + [m.strip() for m in extra.split(",") if m.strip() and m.strip() not in models]
    try:
        from backend.engine.runner import new_run_id

        cmd = data.launch_command(Path(path), chosen, dataset, int(limit) or None, device=device,
                                  stability=stability, threat=threat, run_id=new_run_id(cfg.domain))
        launch = data.launch_run(cfg, cmd, Path(path))
    except Exception as e:
        st.error(f"Could not start the run — {error_text(e)}")
        return
    st.session_state.setdefault("launches", []).append(launch)
    st.success(f"Started the run in the background (process {launch.pid}); log: `{launch.log_path}`")


def launches_panel() -> None:
    launches: list[data.Launch] = st.session_state.get("launches", [])
    if not launches:
        return
    waiting = any(data.launched_run(get_store(), x) is None and x.returncode() is None for x in launches)

    @st.fragment(run_every=3 if waiting else None)
    def _panel() -> None:
        st.subheader("Launched runs")
        store = get_store()
        for x in reversed(launches):
            rc = x.returncode()
            run = data.launched_run(store, x)
            with st.container(border=True):
                if run is not None:
                    st.markdown(f"**{run.run_id}** — status **{run_status(run)}** "
                                f"(process {x.pid}{'' if rc is None else f', exited {rc}'})")
                    st.page_link(RUNS_PAGE, label="open on the Runs page", icon=":material/open_in_new:",
                                 query_params={"run": run.run_id})
                elif rc is None:
                    st.markdown(f"process {x.pid} is starting (loading models and data)…")
                elif rc != 0:
                    last = [ln for ln in x.log_tail(40).splitlines() if ln.strip()]
                    st.error(f"The run exited with code {rc} before it was created: {last[-1] if last else 'no output'}")
                else:
                    st.info(f"process {x.pid} finished; see its log")
                st.caption(f"log: `{x.log_path}`")
        if waiting and not any(data.launched_run(store, x) is None and x.returncode() is None for x in launches):
            st.rerun()

    _panel()


def main() -> None:
    st.title("New domain")
    with guard("opening the results store"):
        sidebar_store(get_store())
    plan_form()
    cfg, path = st.session_state.get("planned_domain"), st.session_state.get("plan_path")
    if cfg is None:
        st.info("Describe a deployment setting and press **Plan**: the planner picks the corruptions it produces, "
                "with severities and a reason for each.")
    else:
        with guard("showing the plan"):
            show_plan(cfg, path)
        gallery_section(cfg)
        launch_form(cfg, path)
    with guard("checking launched runs"):
        launches_panel()


main()
