"""New domain: describe a setting, let the planner choose corruptions, edit the plan, preview it,
and queue a run that a worker evaluates; interrupted runs can be resumed from here.

The planned domain lives in the URL (``?plan=ID``, its id in the store's domains) with the page's edits
(``&drop=…`` planned corruptions removed, ``&add=…`` added, ``&sev=NAME:1,3`` severities changed,
``&dropcomp=…`` compositions removed), so a reload or a shared link opens the same plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from domainbench.records.config import DomainConfig
from domainbench import query
from domainbench.query import Store
from domainbench.service.runs import DuplicateRunError
from domainbench.runtime.literal import printable
from domainbench.frontend import data, exports, figures, ladder, launching, progress, url_state
from domainbench.frontend.ui import error_text, get_store, guard, literal_text, md_escape, sidebar_store, status_badge

EXAMPLE = ("Product photos of clothing taken with cheap phone cameras in a dim warehouse: images are noisy, "
           "blurred by hand shake and heavily JPEG-compressed.")
RUNS_PAGE = str(Path(__file__).resolve().parent / "runs.py")
#: the URL's plan and its edits (see the module's text)
PLAN_PARAM, DROP_PARAM, ADD_PARAM, SEV_PARAM, DROP_COMP_PARAM = "plan", "drop", "add", "sev", "dropcomp"
EDIT_PARAMS = (DROP_PARAM, ADD_PARAM, SEV_PARAM, DROP_COMP_PARAM)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_gallery(index: int, name: str) -> list[np.ndarray]:
    return data.gallery(data.preview_image(index), name)


@st.cache_resource(show_spinner=False, max_entries=256)
def cached_ladder(index: int, name: str) -> tuple[list[np.ndarray], list[float], list[int]]:
    """A corruption's preview on one sample image: its five severities, their SSIM to the clean image and the
    severities with no effect; once per (image, corruption), shared read-only: an edit of the plan (a severity
    clicked) reran the whole preview, unpickling the images and computing every SSIM again."""
    clean = data.preview_image(index)
    images = cached_gallery(index, name)
    return images, ladder.ladder_ssim(clean, images), ladder.no_effect_severities(clean, images, range(1, 6))


@st.cache_resource(show_spinner=False, max_entries=64)
def cached_composed(index: int, pairs: tuple[tuple[str, int], ...]) -> tuple[np.ndarray, float]:
    """A composition's preview on one sample image and its SSIM, once per (image, steps)."""
    clean = data.preview_image(index)
    image = ladder.composed(clean, list(pairs))
    return image, ladder.ladder_ssim(clean, [image])[0]


@st.cache_data(show_spinner=False)
def cached_models() -> list[str]:
    return data.known_models()


# --------------------------------------------------------------------------- plan


def plan_form(store: Store | None) -> None:
    with st.form("plan-form"):
        # a plan restored from a link has put its own description here (restore_plan); otherwise the example
        text = st.text_area("Describe where your images come from and how they get worse",
                            value=None if "domain-text" in st.session_state else EXAMPLE, height=110,
                            key="domain-text") or ""
        c1, c2 = st.columns(2)
        provider = c1.radio("planner", ["offline", "auto", "openai"], horizontal=True,
                            help="offline: a local sentence-embedding planner, no network. openai: any OpenAI-compatible "
                                 "endpoint configured by DOMAINBENCH_LLM_BASE_URL / DOMAINBENCH_LLM_API_KEY. auto: openai "
                                 "when configured, else offline.")
        samples = c2.number_input("samples (majority vote over planner runs)", min_value=1, max_value=50, value=10)
        dataset = st.text_input("dataset the plan will run on (optional)", "", key="plan-dataset",
                                placeholder="sample, a folder of class folders or a CSV manifest",
                                help="Given, the planner leaves out corruptions (and severities) that do not change "
                                     "these images, e.g. colour corruptions on grayscale images, and says which.")
        voters = st.text_area("more planners voting (optional, one per line)", "", key="plan-voters", height=68,
                              placeholder="openai:gpt-4o@https://api.openai.com/v1\nopenai:llama3@http://localhost:11434/v1",
                              help="Each line is another OpenAI-compatible endpoint (OpenAI, Ollama, vLLM) that plans too; "
                                   "a corruption is kept when more than half of the planners choose it, and the plan "
                                   "shows who chose what.")
        photos = st.file_uploader("deployment photos (optional)", type=["jpg", "jpeg", "png", "bmp", "tif", "tiff", "webp"],
                                  accept_multiple_files=True, key="plan-photos",
                                  help="A few unlabelled photos from where the model will be used: their noise, blur, "
                                       "JPEG quality, exposure, contrast, haze and colour cast are measured and matched "
                                       "by corruptions at fitted severities on the dataset below (default: the sample).")
        go = st.form_submit_button("Plan", type="primary")
    if not go:
        return
    try:
        check = launching.check_text(text)  # empty text is refused before the planner loads anything
    except Exception as e:
        st.error(f"Cannot plan this description — {error_text(e)}")
        return
    if store is None:
        st.error("Planning needs the results store, which cannot be opened (see the message above).")
        return
    with st.spinner("planning… (the first plan loads the planner's model)"):
        try:
            providers = [provider, *(v.strip() for v in voters.splitlines() if v.strip())]
            cfg = data.plan_domain(text, provider=providers if len(providers) > 1 else provider, samples=int(samples))
            if photos:
                cfg, skipped = launching.photo_plan(cfg, [(f.name, f.getvalue()) for f in photos], dataset)
                for w in skipped:
                    st.warning(w)
            cfg = launching.fit_plan(cfg, dataset)
            did, path = data.save_domain(store, cfg)
        except Exception as e:  # planner / network / validation: a message, not a traceback
            st.error(f"Planning failed — {error_text(e)}")
            return
    _planned(did, cfg, path, check.message() if check.truncated else None)


def _planned(did: str, cfg: DomainConfig, path: Path | None, note: str | None = None, restored: bool = False) -> None:
    """The page's plan from now on, named in the URL."""
    st.session_state["planned_domain"] = cfg
    st.session_state["plan_id"] = did
    st.session_state["plan_path"] = None if path is None else str(path)
    st.session_state["plan_note"] = note
    st.session_state["plan_restored"] = restored
    st.query_params[PLAN_PARAM] = did  # at once: the link's plan, if any, is no longer the page's
    _reset_editor(cfg)


def restore_plan(store: Store) -> None:
    """The plan a link names (``?plan=ID``) with its edits, unless it is the session's already."""
    did = st.query_params.get(PLAN_PARAM)
    if not did or did == st.session_state.get("plan_id"):
        return
    found = data.stored_plan(store, did)
    if found is None:
        for param in (PLAN_PARAM, *EDIT_PARAMS):
            st.query_params.pop(param, None)
        shown = f"“{did}”" if data.PLAN_ID.fullmatch(did) else "the link's plan id (not 16 hexadecimal characters)"
        st.warning(f"There is no planned domain {shown} in this store: the link may be mistyped or from another "
                   "store. Plan one below.")
        return
    _planned(did, *found, restored=True)
    # the form shows the description of the plan below it, so pressing Plan plans that text, not the example
    st.session_state["domain-text"] = found[0].domain
    _url_edits()


def _url_edits() -> None:
    """Apply the URL's edits to the plan just restored; names the plan does not know are ignored."""
    dropped = set(st.query_params.get_all(DROP_PARAM))
    rows = [r for r in st.session_state["plan_rows"] if r["name"] not in dropped]
    rows += [_hand_row(n) for n in url_state.chosen(ADD_PARAM, launching.catalogue_names())
             if all(r["name"] != n for r in rows)]
    for item in st.query_params.get_all(SEV_PARAM):
        name, _, levels = item.rpartition(":")
        row = next((r for r in rows if r["name"] == name), None)
        chosen = [int(v) for v in levels.split(",") if v.isdigit() and int(v) in launching.severity_levels(name)]
        if row is not None:
            row["initial"] = row["severities"] = sorted(set(chosen))
    st.session_state["plan_rows"] = rows
    dropped = set(st.query_params.get_all(DROP_COMP_PARAM))
    st.session_state["plan_compositions"] = [n for n in st.session_state["plan_compositions"] if n not in dropped]


def _hand_row(name: str) -> dict[str, Any]:
    levels = launching.severity_levels(name)
    return {"name": name, "severities": list(levels), "initial": list(levels), "params": {},
            "reason": "added by hand", "by_hand": True}


def plan_url(cfg: DomainConfig, rows: list[dict[str, Any]], kept: list[str]) -> None:
    """The page's plan and its edits into the URL (see the module's text), from what the page shows: rewritten
    on every draw, so it holds the plan again after a visit to another page."""
    planned = {c.name: sorted(c.severities) for c in cfg.corruptions}
    by_plan = {r["name"] for r in rows if not r.get("by_hand")}
    url_state.write(PLAN_PARAM, st.session_state.get("plan_id"))
    url_state.write(DROP_PARAM, [n for n in planned if n not in by_plan])
    url_state.write(ADD_PARAM, [r["name"] for r in rows if r.get("by_hand")])
    url_state.write(SEV_PARAM, [f"{r['name']}:{','.join(map(str, r['severities']))}" for r in rows
                                if r["severities"] != (launching.severity_levels(r["name"]) if r.get("by_hand")
                                                       else planned.get(r["name"]))])
    url_state.write(DROP_COMP_PARAM, [c.name for c in cfg.compositions if c.name not in kept])


def _reset_editor(cfg: DomainConfig) -> None:
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith("sev-")]:
        del st.session_state[key]
    st.session_state["plan_rows"] = launching.plan_rows(cfg)
    st.session_state["plan_compositions"] = [c.name for c in cfg.compositions]


def show_plan(store: Store, cfg: DomainConfig, path: str) -> None:
    st.subheader(f"Chosen corruptions ({len(cfg.corruptions)})")
    prov = cfg.planner
    if st.session_state.get("plan_restored"):
        literal_text("Planned for (the plan of this link)", cfg.domain)
    saved = f"config saved to `{path}`" if path else f"stored as domain {st.session_state.get('plan_id')}"
    # the prompt's version is an internal hash: on hover, for a bug report, not in the reader's line
    st.caption(f"planner {prov.provider} · {prov.model or 'no model'} · {prov.samples} sample(s) · {saved}",
               help=f"planner prompt version: {prov.prompt_version or 'not recorded'}")
    if st.session_state.get("plan_note"):
        st.warning(st.session_state["plan_note"])
    rows = []
    for c in cfg.corruptions:
        try:
            family = data.corruption_info(c.name)["family"]
        except ValueError:
            family = "?"
        rows.append({"corruption": c.name, "family": family, "severities": ", ".join(map(str, c.severities)),
                     "selected %": 100.0 * prov.frequencies.get(c.name, 1.0), "reason": c.reason})
    exports.plain_table(pd.DataFrame(rows), column_config={
        "selected %": st.column_config.ProgressColumn("selected %", min_value=0, max_value=100, format="%.0f%%")})
    agreement, notes = launching.plan_notes(cfg)
    if agreement is not None:
        st.markdown("**How the planners voted**")
        exports.plain_table(agreement)
    for v in notes:
        st.warning(v)
    with guard("drawing the selection heatmap"):
        freq = data.selection_frequencies(store, extra=cfg)
        st.plotly_chart(figures.selection_heatmap(freq, highlight=freq.columns[0] if len(freq.columns) else None),
                        width="stretch")
        st.caption("Columns: this plan (outlined) and the other stored domains. A cell is the share of planner "
                   "samples that chose the corruption; the majority vote keeps those chosen in most samples.")


def _remove(name: str) -> None:
    st.session_state["plan_rows"] = [r for r in st.session_state["plan_rows"] if r["name"] != name]
    st.session_state.pop(f"sev-{name}", None)


def _remove_composition(name: str) -> None:
    st.session_state["plan_compositions"] = [n for n in st.session_state["plan_compositions"] if n != name]


def _add() -> None:
    name = st.session_state.get("add-corruption")
    rows = st.session_state["plan_rows"]
    if name and all(r["name"] != name for r in rows):
        rows.append(_hand_row(name))
    st.session_state["add-corruption"] = None


def edit_plan(cfg: DomainConfig) -> DomainConfig | None:
    """The plan as edited on the page (corruptions added or removed, severities changed); None while invalid."""
    st.subheader("Edit the plan")
    st.caption("Remove corruptions that cannot happen in your setting, add ones the planner missed, and pick the "
               "severities to evaluate. The run evaluates exactly this plan.")
    rows: list[dict[str, Any]] = st.session_state.setdefault("plan_rows", launching.plan_rows(cfg))
    for row in rows:
        name = row["name"]
        with st.container(key=f"row-{name}", border=True):
            c1, c2, c3 = st.columns([3, 4, 1], vertical_alignment="center")
            c1.markdown(f"**{name}**  \n{md_escape(row['reason'] or '')}")
            # the default is the plan's, never the edited value: a changing default would reset the widget
            # a flip has one level (its severities are the same image): the picker offers that one, not 2–5 as well
            levels = launching.severity_levels(name)
            chosen = c2.pills(f"severities of {name}", levels, selection_mode="multi",
                              default=[s for s in row["initial"] if s in levels], key=f"sev-{name}",
                              help=None if len(levels) > 1 else f"{name} has no severity scale: one level")
            row["severities"] = sorted(chosen or [])
            c3.button("Remove", key=f"rm-{name}", on_click=_remove, args=(name,))
    kept: list[str] = st.session_state.setdefault("plan_compositions", [c.name for c in cfg.compositions])
    for i, comp in enumerate(c for c in cfg.compositions if c.name in kept):
        # keyed by position: a composition's name is free text, not a CSS class
        with st.container(key=f"composition-{i}", border=True):
            c1, c3 = st.columns([7, 1], vertical_alignment="center")
            c1.markdown(f"**{md_escape(comp.cell_name)}** (one cell, steps in order): "
                        + " → ".join(f"{md_escape(c)} s{s}" for c, s in comp.pairs)
                        + (f"  \n{md_escape(comp.reason)}" if comp.reason else ""))
            c3.button("Remove", key=f"rm-composition-{i}", on_click=_remove_composition, args=(comp.name,))
    names = [n for n in launching.catalogue_names() if n not in {r["name"] for r in rows}]
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    c1.selectbox("add a corruption", names, index=None, placeholder="choose a corruption from the catalogue",
                 key="add-corruption")
    c2.button("Add corruption", on_click=_add, disabled=not names)
    plan_url(cfg, rows, kept)
    try:
        return launching.edited_domain(cfg, rows, kept)
    except Exception as e:
        st.error(f"The plan cannot be launched yet — {error_text(e)}")
        return None


def gallery_section(cfg: DomainConfig) -> None:
    st.subheader("Preview on a sample image")
    with guard("preparing the preview"):
        _, classes, labels = data.sample_images()
        first = {c: int(np.flatnonzero(labels == i)[0]) for i, c in enumerate(classes) if (labels == i).any()}
        cls = st.selectbox("sample image", list(first), key="gallery-class")
        index = first[cls]
        st.image(data.preview_image(index), caption="clean", width=112)
        for c in cfg.corruptions:
            with guard(f"previewing {c.name}"), st.container(border=True, key=f"preview-{c.name}"):
                images, damage, flat = cached_ladder(index, c.name)
                levels = launching.severity_levels(c.name)
                # one picture for a flip: its five levels are the same image
                images, damage, flat = images[:len(levels)], damage[:len(levels)], [s for s in flat if s in levels]
                st.markdown(f"**{c.name}** — " + ("severities 1–5" if len(levels) > 1 else "one level, no severity scale")
                            + f" (evaluated: {', '.join(map(str, c.severities))})")
                if c.reason:
                    st.text(f"why: {c.reason}")
                if data.is_temporal(c.name):
                    st.caption(f"video only: evaluated on clip datasets (still-image runs leave it out). Shown on a "
                               f"{data.PREVIEW_CLIP_FRAMES}-frame clip panning over this image: the frame it changes most.")
                elif flat:
                    run_flat = [s for s in flat if s in c.severities]
                    st.warning(f"{c.name} has no effect on this image at severit{'y' if len(flat) == 1 else 'ies'} "
                               f"{', '.join(map(str, flat))} (mean pixel change < {ladder.NO_EFFECT_PIXELS} of 255, SSIM ≥ {ladder.NO_EFFECT_SSIM}; e.g. "
                               "a colour corruption on grayscale images)"
                               + (f"; the plan evaluates {', '.join(map(str, run_flat))}, cells that measure nothing."
                                  if run_flat else "."))
                st.image(images, width=112, caption=[
                    f"s{s} · SSIM {v:.2f}" + ("" if s in c.severities else " (not run)")
                    for s, v in zip(levels, damage, strict=True)])
        for comp in cfg.compositions:
            with guard(f"previewing {comp.cell_name}"), st.container(border=True, key=f"preview-{comp.cell_name}"):
                composed, ssim = cached_composed(index, tuple((c, int(s)) for c, s in comp.pairs))
                st.markdown(f"**{md_escape(comp.cell_name)}** — steps in order: "
                            + " → ".join(f"{md_escape(c)} s{s}" for c, s in comp.pairs))
                if comp.reason:
                    st.text(f"why: {comp.reason}")
                st.image(composed, width=112, caption=f"SSIM {ssim:.2f}")
        st.caption("SSIM against the clean image (1 = unchanged, lower = more damage) predicts how hard each "
                   "severity is before anything is evaluated.")


# --------------------------------------------------------------------------- launch & queue


def launch_form(store: Store, cfg: DomainConfig) -> None:
    st.subheader("Launch a run")
    known: list[str] = []
    with guard("listing models"):
        known = cached_models()
    defaults = [m for m in ("embedded:fmnist-plain", "embedded:fmnist-augmented") if m in known]
    with st.form("launch-form"):
        models = st.multiselect("models", known, default=defaults)
        extra = st.text_input("more models (comma-separated names, e.g. open_clip:ViT-B-32/openai)", "", key="extra-models")
        c1, c2, c3 = st.columns(3)
        dataset = c1.text_input("dataset", "sample", key="dataset",
                                help="`sample`, a folder of class folders, a CSV manifest, or an image folder")
        limit = c2.number_input("image limit (0 = all)", min_value=0, value=200, step=50, key="limit")
        baseline = c3.text_input("baseline model (empty: the first model)", "", key="baseline")
        c4, c5, c6 = st.columns(3)
        device = c4.selectbox("device", ["auto", "cpu", "cuda"])
        stability = c5.checkbox("measure embedding stability", value=True, key="stability")
        threat = c6.checkbox("measure PD threat", value=True, key="threat")
        skip_unreadable = st.checkbox("skip image files that do not decode (counted and listed in the run; "
                                      "otherwise such a file refuses the dataset)", value=False, key="skip-unreadable")
        frames = st.number_input("frames per clip, when the dataset is a clip folder (class folders of videos or of "
                                 "frame folders; every clip is evaluated, the image limit does not apply)",
                                 min_value=1, value=8, key="clip-frames")
        f1, f2 = st.columns([3, 1])
        fmr = f1.checkbox("FMR search instead: the hardest perturbations an oracle zoo still labels correctly "
                          "(SA, PA, FMR per model)", value=False, key="fmr")
        fmr_budget = f2.number_input("FMR budget (steps)", min_value=1, value=10, key="fmr-budget")
        oracle = st.text_input("FMR oracle: at least two zero-shot models, comma-separated",
                               ", ".join(defaults), key="fmr-oracle",
                               help="A tested model that is also an oracle member gets FMR near 100 by construction: "
                                    "name other models here than the models above.")
        overlap_ok = st.checkbox("FMR: launch even if a tested model is an oracle member (its FMR means nothing)",
                                 value=False, key="fmr-overlap-ok")
        go = st.form_submit_button("Launch run", type="primary")
    if not go:
        return
    chosen = models + [m.strip() for m in extra.split(",") if m.strip() and m.strip() not in models]
    try:
        clips = not fmr and launching.is_clip_folder(dataset)
        run_cfg = launching.run_config(chosen, dataset, None if clips else int(limit) or None, baseline.strip() or None,
                                       device, stability and not fmr, threat and not fmr, skip_unreadable)
        settings = launching.fmr_settings(oracle, int(fmr_budget)) if fmr else None
        both = [m for m in chosen if settings is not None and m in settings.oracle]
        if both and not overlap_ok:  # said before anything is queued, not after the run finishes
            st.warning(f"Not queued — {', '.join(both)} {'is' if len(both) == 1 else 'are'} both tested and in the FMR "
                       "oracle: the oracle labels its own answers correct, so FMR is near 100 by construction. Name "
                       "other oracle models (or test other models), or tick “launch even if a tested model is an "
                       "oracle member”.")
            return
        with st.spinner("checking the dataset and the models…"):
            run = launching.enqueue(store, cfg, run_cfg, fmr=settings, frames=int(frames) if clips else None)
    except DuplicateRunError as e:
        st.warning(f"Not queued again — {error_text(e)}. It is listed below.")
        return
    except Exception as e:
        st.error(f"Nothing was queued — {error_text(e)}")
        return
    queued = f"Queued run **{md_escape(printable(run.run_id))}**"
    if progress.worker_alive(store):
        st.success(f"{queued}: a worker picks it up and evaluates it (progress below).")
    else:  # never a green "picks it up" while nothing will
        st.warning(f"{queued}, but nothing evaluates it yet: {progress.NO_WORKER}. It waits in the queue below.")


def queue_panel(store: Store) -> None:
    frame = launching.queue_frame(store)
    if frame.empty:
        return
    busy = bool(frame["status"].isin(["queued", "running"]).any())

    @st.fragment(run_every=2 if busy else None)
    def _panel() -> None:
        with guard("reading the queue"):
            current = launching.queue_frame(store)
            st.subheader("Queued and recent runs")
            st.caption("Runs launched here wait in the store's queue until a worker takes them (`domainbench ui` "
                       "starts one; more machines can run `domainbench worker`).")
            for row in current.itertuples(index=False):
                with st.container(key=f"queued-{row.run}", border=True):
                    c1, c2, c3 = st.columns([6, 2, 2], vertical_alignment="center")
                    run = query.find_run(store, row.run)
                    units = progress.unit_progress(store, run) if run is not None else None
                    done = ("no units" if units is None else f"all {units.done:,} units" if row.status == "done"
                            else units.text())
                    who = f" · worker `{row.worker}`" if row.worker else ""
                    c1.markdown(f"{status_badge(row.status)} **{md_escape(row.run)}** · {done}{who}  \n"
                                f"{md_escape(data.short_text(row.domain, 90))}")
                    c2.page_link(RUNS_PAGE, label="open", icon=":material/open_in_new:", query_params={"run": row.run})
                    if row.resumable and c3.button("Resume", key=f"resume-{row.run}", icon=":material/replay:"):
                        try:
                            launching.resume(store, row.run)
                        except Exception as e:
                            st.error(f"Cannot resume {row.run} — {error_text(e)}")
                        else:
                            st.rerun()  # the whole page: the panel starts polling again
            if busy and not current["status"].isin(["queued", "running"]).any():
                st.rerun()  # the last run finished: stop polling

    _panel()


def main() -> None:
    st.title("New domain")
    store: Store | None = None
    with guard("opening the results store"):
        store = get_store()
        sidebar_store(store)
    if store is not None:  # before the form: a link's plan brings its description into it
        with guard("opening the plan of the link"):
            restore_plan(store)
    plan_form(store)
    cfg, path = st.session_state.get("planned_domain"), st.session_state.get("plan_path")
    if cfg is None:
        st.info("Describe a deployment setting and press **Plan**: the planner picks the corruptions it produces, "
                "with severities and a reason for each; you can edit the plan before launching it.")
    elif store is not None:
        with guard("showing the plan"):
            show_plan(store, cfg, path)
        edited = None
        with guard("editing the plan"):
            edited = edit_plan(cfg)
        if edited is not None:
            gallery_section(edited)
            with guard("launching"):
                launch_form(store, edited)
    if store is not None:
        queue_panel(store)


main()
