"""A run (or several) as one file to hand on: ``domainbench report RUN [RUN ...] -o report.html`` (or ``--format md``).

The HTML is self-contained: its Plotly figures carry plotly.js inline (once, in the first figure), thumbnails are
``data:`` URIs, there is no stylesheet, font or script from elsewhere, so it opens offline in any browser. Every
number is read from the same functions as ``export --format json`` (the report, its intervals, the verdicts and
their tied groups), and each table cell of a number carries it at full precision in ``data-value`` (with
``data-metric``, ``data-model`` and ``data-cell``), so a test reads the file's numbers back and compares them with
the JSON export.
"""

from __future__ import annotations

import base64
import html
import io
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from domainbench import query
from domainbench.errors import UserInputError
from domainbench.metrics.comparison import Comparison
from domainbench.metrics.confidence import RunIntervals
from domainbench.metrics.registry import Metric, summary_metrics
from domainbench.records.report import RunReport
from domainbench.query import RunRecord, Store

#: packages whose versions the report names (read from the installed metadata: nothing is imported)
PACKAGES = ("domainbench", "numpy", "scipy", "torch", "open_clip_torch", "transformers", "plotly", "pydantic")
#: cell metrics of the per-corruption table, and the ones with an interval beside them
CELL_METRICS = ("balanced_accuracy", "top1_accuracy", "label_flip_probability", "ece", "ssim")
CELL_INTERVALS = ("balanced_accuracy", "top1_accuracy", "label_flip_probability")
FLIPS_PER_MODEL = 4
THUMB = 96


@dataclass
class Flip:
    model: str
    corruption: str
    severity: int
    image: int
    label: str
    clean_prediction: str
    prediction: str
    confidence: float
    clean_png: str = ""
    corrupted_png: str = ""


@dataclass
class RunSection:
    run: RunRecord
    report: RunReport
    intervals: RunIntervals | None
    comparison: Comparison | None
    why_no_verdict: str
    flips: list[Flip]
    flips_note: str
    caveats: list[str]
    figures: list[Any] = field(default_factory=list)
    costs: list[Any] = field(default_factory=list)
    cost_sentence: str | None = None
    #: the classes, those that break at the mildest severities first (``metrics.class_breaks``)
    class_ranks: list[Any] = field(default_factory=list)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "not installed"
    return out


def _png(image: np.ndarray) -> str:
    from PIL import Image

    img = Image.fromarray(np.asarray(image, dtype=np.uint8))
    img.thumbnail((THUMB, THUMB))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def confident_flips(store: Store, run: RunRecord, per_model: int = FLIPS_PER_MODEL) -> list[Flip]:
    """Per model, the corrupted images whose prediction left the clean one with the highest confidence: the failures
    the model is surest of (ties broken by cell and image, so the choice is deterministic)."""
    out: list[Flip] = []
    for model in run.config.models:
        units = query.model_units(store, run.run_id, model)
        clean: dict[int, int] = {}
        labels: dict[int, int] = {}
        classes: list[str] = []
        for u in units:
            classes = list(u.classes)
            if u.corruption == "clean":
                clean.update(zip(np.asarray(u.indices).tolist(), np.asarray(u.preds).tolist()))
                if u.labels is not None:
                    labels.update(zip(np.asarray(u.indices).tolist(), np.asarray(u.labels).tolist()))
        found = []
        for u in units:
            if u.corruption == "clean" or u.corruption.startswith("shift:") or u.confidence is None:
                continue
            for i, p, c in zip(np.asarray(u.indices).tolist(), np.asarray(u.preds).tolist(),
                               np.asarray(u.confidence).tolist(), strict=True):
                if p >= 0 and i in clean and clean[i] != p:
                    found.append((-float(c), u.corruption, u.severity, i, p))
        for negc, corr, sev, i, p in sorted(found)[:per_model]:
            y = labels.get(i)
            out.append(Flip(model, corr, sev, i, "" if y is None else classes[y], classes[clean[i]], classes[p], -negc))
    return out


def _thumbnails(run: RunRecord, flips: list[Flip]) -> str:
    """Fill each flip's clean and corrupted thumbnails (made again from the run's seed); why not, if they cannot be."""
    try:
        for key in sorted({(f.corruption, f.severity) for f in flips}):
            mine = [f for f in flips if (f.corruption, f.severity) == key]
            idx = sorted({f.image for f in mine})
            clean, kept_clean = query.recreate_images(run, "clean", 0, idx)
            bad, kept = query.recreate_images(run, key[0], key[1], idx)
            at_clean = {int(i): k for k, i in enumerate(kept_clean)}
            at = {int(i): k for k, i in enumerate(kept)}
            for f in mine:
                if f.image in at_clean and f.image in at:
                    f.clean_png, f.corrupted_png = _png(clean[at_clean[f.image]]), _png(bad[at[f.image]])
    except UserInputError as e:  # the dataset moved or changed since the run: the list stays, without pictures
        return f"thumbnails left out: {e}"
    return ""


def caveats(run: RunRecord, report: RunReport, intervals: RunIntervals | None) -> list[str]:
    """What the run did not measure or measures only approximately, in plain sentences."""
    from domainbench.records.model_backends import capabilities_of

    out = []
    if not report.models or not report.models[0].labeled:
        out.append("The dataset is unlabelled: accuracy, mCE, rCE, verdicts and groups do not apply; flip probability "
                   "and stability do.")
    unsafe = [f"{t.corruption}@{t.severity}" for t in report.cells_by_safety("unsafe")]
    border = [f"{t.corruption}@{t.severity}" for t in report.cells_by_safety("borderline")]
    if unsafe:
        out.append(f"PD-unsafe cells (the corruption may have changed the true label, so an error there is not "
                   f"necessarily the model's): {', '.join(unsafe)}.")
    if border:
        out.append(f"PD-borderline cells (the images cannot tell whether labels survive): {', '.join(border)}.")
    if not report.threat:
        out.append("The PD threat was not computed (run --no-threat): no cell is known to be label-preserving.")
    remote = [m for m in report.model_names if (c := capabilities_of(m)).remote and not c.image_embeddings]
    if remote:
        out.append(f"Remote models without image embeddings (no stability, no PD threat from them): {', '.join(remote)}.")
    if not report.stability:
        out.append("Embedding stability was not measured (run --no-stability).")
    if run.config.adaptive:
        out.append("The run stopped its cells adaptively: intervals are anytime-valid confidence sequences.")
    if intervals is not None:
        out.extend(intervals.notes)
    if run.n_unreadable:
        out.append(f"{run.n_unreadable} unreadable image files were skipped.")
    return out


def build(store: Store, run_ids: Sequence[str], confidence: float = 0.95, thumbnails: bool = True,
          figures: bool = True) -> tuple[list[RunSection], Comparison | None, str]:
    """Everything the file shows, per run, and across the runs (their joint comparison, or why there is none)."""
    if not run_ids:
        raise UserInputError("report needs at least one RUN; see `domainbench ls`")
    sections = []
    for rid in run_ids:
        run = query.get_run(store, rid)
        report = query.report(store, rid)
        read = query.outcomes_once()
        try:
            intervals = query.intervals(store, report, confidence, read)
        except ValueError:  # no per-image outcomes stored: values without intervals
            intervals = None
        comparison, why = None, ""
        if len(report.model_names) < 2:
            why = "one model: there is nothing to compare it with"
        elif not report.models[0].labeled:
            why = "the dataset is unlabelled"
        else:
            try:
                comparison = query.comparison(store, [rid], confidence=confidence, read=read)
            except UserInputError as e:
                why = str(e)
        flips = confident_flips(store, run)
        note = _thumbnails(run, flips) if thumbnails and flips else ""
        section = RunSection(run, report, intervals, comparison, why, flips, note, caveats(run, report, intervals))
        _add_costs(section)
        _add_class_breaks(section)
        if figures:
            from domainbench.frontend import figures as fig

            bands = {} if intervals is None else {(c.model, c.corruption, c.severity): c.balanced_accuracy
                                                  for c in intervals.cells}
            lfp = {} if intervals is None else {(c.model, c.corruption, c.severity): c.label_flip_probability
                                                for c in intervals.cells}
            if report.models and report.models[0].labeled:
                section.figures.append(fig.severity_lines(report, bands=bands))
            section.figures.append(fig.lfp_heatmap(report, lfp))
            if any(c.images_per_second is not None for c in section.costs):
                section.figures.append(pareto_figure(section))
        sections.append(section)
    across, why = None, ""
    if len(run_ids) > 1:
        try:
            across = query.comparison(store, list(run_ids), confidence=confidence)
        except UserInputError as e:
            why = str(e)
    return sections, across, why


def _add_costs(s: RunSection) -> None:
    from domainbench.frontend.cost_view import costs_of, sentence

    s.costs = costs_of(s.run, s.report, s.comparison)
    s.cost_sentence = sentence(s.costs, s.comparison) if s.costs else None


def _add_class_breaks(s: RunSection) -> None:
    from domainbench.metrics.class_breaks import breaks_first, class_cells

    classes = list(s.run.dataset.classes) if s.run.dataset is not None else []
    s.class_ranks = breaks_first(class_cells(s.report, classes)) if classes else []


#: the report's table of the classes that break first: at most this many rows
CLASS_ROWS = 10
CLASS_HEADER = ["class", "mean breaking severity", "breaks in (model × corruption)"]
CLASS_NOTE = ("A class breaks under a corruption at the lowest severity where its accuracy (recall) falls below "
              "halfway from its clean accuracy to chance; a pair where it never breaks counts as the highest severity "
              "+ 1. Lowest first: the classes that break at the mildest severities.")


def _class_rows(s: RunSection) -> list[list[str]]:
    return [[r.label, f"{r.mean_breaking_severity:.2f}", f"{r.broken} of {r.pairs}"]
            for r in s.class_ranks[:CLASS_ROWS]]


def _resource_headers(costs: Sequence[Any]) -> list[str]:
    """The resource columns (``ModelCost.resource_columns``) any model of the run has, in their order."""
    return list(dict.fromkeys(h for c in costs for h in c.resource_columns()))


def pareto_figure(s: RunSection) -> Any:
    from domainbench.frontend.cost_view import pareto_figure as figure

    bounds = {c.model: getattr(s.intervals.model(c.model), "mean_corrupted_accuracy", None)
              for c in s.costs} if s.intervals is not None else {}
    return figure(s.costs, bounds)


# --------------------------------------------------------------------------- rendering


def _num(value: Any, metric: Metric | None = None, percent: bool | None = None) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    if not isinstance(value, float):
        return str(value)
    pct = metric.percent if percent is None and metric is not None else bool(percent)
    return f"{100 * value:.1f}" if pct else f"{value:.3f}"


def _with_interval(value: Any, iv: tuple[float, float] | None, pct: bool) -> str:
    text = _num(value, percent=pct)
    if iv is None or text == "n/a":
        return text
    return f"{text} ({_num(iv[0], percent=pct)}–{_num(iv[1], percent=pct)})"


def _td(text: str, *, metric: str = "", model: str = "", cell: str = "", value: Any = None,
        low: Any = None, high: Any = None) -> str:
    attrs = ""
    if metric:
        attrs = (f' data-metric="{html.escape(metric)}" data-model="{html.escape(model)}" data-cell="{html.escape(cell)}"'
                 f' data-value="{"" if value is None else repr(float(value))}"')
        if low is not None:
            attrs += f' data-low="{low!r}" data-high="{high!r}"'
    return f"<td{attrs}>{html.escape(text)}</td>"


def _header(m: Metric) -> str:
    """A column's header, with " %" where its values are shown in % (the table header of a rate may not say so)."""
    h = m.table_header
    return h if not m.percent or h.endswith("%") else f"{h} %"


def _table(header: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _summary_rows(s: RunSection) -> tuple[list[str], list[str]]:
    groups = s.comparison.groups.letters if s.comparison is not None else {}
    metrics = summary_metrics()
    header = ["model", *(["group"] if groups else []), *(_header(m) for m in metrics)]
    rows = []
    for row in s.report.table():
        iv = s.intervals.model(row.model) if s.intervals is not None else None
        cells = [_td(row.model + (" (baseline)" if row.baseline else ""))]
        if groups:
            cells.append(f'<td data-group="{html.escape(row.model)}">{html.escape(groups.get(row.model, ""))}</td>')
        for m in metrics:
            bounds = getattr(iv, m.name, None)
            v = m.read(row)
            cells.append(_td(_with_interval(v, bounds, m.percent), metric=m.name, model=row.model, value=v,
                             low=None if bounds is None else bounds[0], high=None if bounds is None else bounds[1]))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return header, rows


def _cell_rows(s: RunSection) -> tuple[list[str], list[str]]:
    from domainbench.metrics.registry import metric

    shown = [metric(n) for n in CELL_METRICS]
    header = ["model", "cell", *(_header(m) for m in shown)]
    rows = []
    for m, c in s.report.all_cells():
        t = s.report.threat_of(c.corruption, c.severity)
        iv = s.intervals.cell(m.model, c.corruption, c.severity) if s.intervals is not None else None
        cell = "clean" if c.corruption == "clean" else f"{c.corruption}@{c.severity}"
        tds = [_td(m.model), _td(cell)]
        for metric_ in shown:
            v = metric_.read(c, t)
            bounds = getattr(iv, metric_.name, None) if metric_.name in CELL_INTERVALS else None
            tds.append(_td(_with_interval(v, bounds, metric_.percent), metric=metric_.name, model=m.model,
                           cell=f"{c.corruption}:{c.severity}", value=v, low=None if bounds is None else bounds[0],
                           high=None if bounds is None else bounds[1]))
        rows.append(f"<tr>{''.join(tds)}</tr>")
    return header, rows


def _plan_rows(run: RunRecord) -> list[tuple[str, str, str]]:
    d = run.domain
    rows = [(c.name, ", ".join(str(s) for s in c.severities), c.reason) for c in d.corruptions]
    rows += [(comp.cell_name, " then ".join(f"{st.corruption}@{st.severity}" for st in comp.steps), comp.reason)
             for comp in d.compositions]
    rows += [(sh.cell_name, "your own images", sh.path) for sh in d.shift]
    return rows


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}
td[data-metric]{text-align:right}th{background:#f3f3f3}.note{color:#555;font-size:.9em}
.flips{display:flex;flex-wrap:wrap;gap:12px}.flip{border:1px solid #ddd;padding:6px;font-size:.8em;width:210px}
.flip img{image-rendering:pixelated;width:96px;height:96px}.verdict{border-left:4px solid #4a7;padding-left:.6em}"""


def to_html(sections: Sequence[RunSection], across: Comparison | None, why_not: str) -> str:
    import plotly.io as pio

    parts = []
    plotly_js_done = False
    title = "domainbench report: " + ", ".join(s.run.run_id for s in sections)
    for s in sections:
        r, run = s.report, s.run
        p = [f'<section id="run-{html.escape(run.run_id)}"><h2>Run {html.escape(run.run_id)}</h2>',
             f"<p><b>Domain:</b> {html.escape(run.domain.domain)}</p>",
             f"<p>Models: {html.escape(', '.join(r.model_names))}; baseline {html.escape(r.baseline)}; "
             f"seed {run.config.seed}; dataset {html.escape(run.dataset.name if run.dataset else run.config.dataset)}"
             f" ({run.dataset.size if run.dataset else '?'} images).</p>",
             "<h3>The plan</h3>",
             _table(["cell", "severities", "reason"], [
                 f"<tr>{_td(a)}{_td(b)}{_td(c)}</tr>" for a, b, c in _plan_rows(run)], "plan"),
             "<h3>Verdict</h3>"]
        if s.comparison is not None:
            p += [f'<p class="verdict">{html.escape(v.sentence)}</p>' for v in s.comparison.verdicts]
            p.append(f'<p class="groups">{html.escape(s.comparison.groups.sentence())}</p>')
        else:
            p.append(f'<p class="note">No verdict: {html.escape(s.why_no_verdict)}</p>')
        level = f"{100 * s.intervals.confidence:g} %" if s.intervals is not None else ""
        header, rows = _summary_rows(s)
        p += ["<h3>Summary</h3>", _table(header, rows, "summary"),
              f'<p class="note">value (low–high): {level} intervals; accuracies in %, mCE/rCE/mFR relative to the '
              f'baseline (1.0 = as robust as it). n/a: does not apply.</p>' if level else ""]
        for f in s.figures:
            p.append(f'<div class="figure">{pio.to_html(f, full_html=False, include_plotlyjs=not plotly_js_done)}</div>')
            plotly_js_done = True
        if s.costs:
            extra = _resource_headers(s.costs)
            p += ["<h3>Cost beside robustness</h3>", _table(
                ["model", "images/s", "corrupted acc %", "Pareto-efficient", *extra],
                [f"<tr>{_td(c.model)}<td data-cost=\"{html.escape(c.model)}\">"
                 f"{'n/a' if c.images_per_second is None else f'{c.images_per_second:,.0f}'}</td>"
                 f"{_td(_num(c.corrupted_accuracy, percent=True))}{_td('yes' if c.pareto else '')}"
                 + "".join(_td(c.resource_columns().get(h, "n/a")) for h in extra) + "</tr>"
                 for c in s.costs], "cost"),
                  f'<p class="note">images/s: images scored over the preprocess + forward seconds of the run\'s timings '
                  "(this machine, shared with what else ran).</p>"]
            if s.cost_sentence:
                p.append(f'<p class="cost-sentence">{html.escape(s.cost_sentence[0].upper() + s.cost_sentence[1:])}.</p>')
        if s.class_ranks:
            p += ["<h3>Where classes break first</h3>",
                  _table(CLASS_HEADER, ["<tr>" + "".join(_td(x) for x in row) + "</tr>" for row in _class_rows(s)],
                         "class-breaks"),
                  f'<p class="note">{html.escape(CLASS_NOTE)}</p>']
        header, rows = _cell_rows(s)
        p += ["<h3>Per corruption and severity</h3>", _table(header, rows, "cells")]
        from domainbench.metrics.damage_report import damage_line

        line = damage_line(r)
        if line:
            p.append(f'<p class="note">{html.escape(line)}</p>')
        p.append("<h3>The most confident flips</h3>")
        if s.flips_note:
            p.append(f'<p class="note">{html.escape(s.flips_note)}</p>')
        if not s.flips:
            p.append('<p class="note">No flip with a stored confidence.</p>')
        cards = []
        for f in s.flips:
            imgs = "".join(f'<img alt="{a}" src="{src}">' for a, src in (("clean", f.clean_png), ("corrupted", f.corrupted_png))
                           if src)
            cards.append(f'<div class="flip">{imgs}<br>{html.escape(f.model)}<br>{html.escape(f.corruption)}@{f.severity}, '
                         f'image {f.image}<br>{html.escape(f.clean_prediction)} → <b>{html.escape(f.prediction)}</b> '
                         f'({100 * f.confidence:.0f} %)' + (f"<br>true: {html.escape(f.label)}" if f.label else "")
                         + "</div>")
        p.append(f'<div class="flips">{"".join(cards)}</div>')
        p += ["<h3>Caveats: what was not measured</h3>",
              "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in s.caveats) + "</ul>" if s.caveats
              else '<p class="note">None.</p>']
        fp = run.dataset.fingerprint if run.dataset is not None else None
        p += ["<h3>Data and software</h3>",
              f"<p>Data fingerprint: {html.escape(fp.describe() if fp is not None else 'none recorded')}</p>",
              f"<p>Report schema {r.versions.report_schema}, domainbench {html.escape(r.versions.domainbench)} "
              f"(the run's).</p></section>"]
        parts.append("".join(p))
    if len(sections) > 1:
        parts.append("<section><h2>Across the runs</h2>")
        if across is not None:
            parts += [f'<p class="verdict">{html.escape(v.sentence)}</p>' for v in across.verdicts]
            parts.append(f'<p class="groups">{html.escape(across.groups.sentence())}</p>')
        else:
            parts.append(f'<p class="note">No joint verdict: {html.escape(why_not)}</p>')
        parts.append("</section>")
    versions = ", ".join(f"{k} {v}" for k, v in _versions().items())
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(parts)}"
            f'<footer class="note">Made by domainbench report with {html.escape(versions)}. '
            "Self-contained: no network needed.</footer></body></html>")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(sections: Sequence[RunSection], across: Comparison | None, why_not: str) -> str:
    """The same content for a pull request: tables and sentences, no figures or thumbnails."""
    from domainbench.metrics.registry import metric

    out = [f"# domainbench report: {', '.join(s.run.run_id for s in sections)}"]
    for s in sections:
        r, run = s.report, s.run
        out += [f"## Run {run.run_id}", f"**Domain:** {_md_escape(run.domain.domain)}",
                f"Models: {', '.join(r.model_names)}; baseline {r.baseline}; seed {run.config.seed}.",
                "### The plan", _md_table(["cell", "severities", "reason"], _plan_rows(run)), "### Verdict"]
        if s.comparison is not None:
            out += [v.sentence for v in s.comparison.verdicts] + [s.comparison.groups.sentence()]
        else:
            out.append(f"No verdict: {s.why_no_verdict}")
        groups = s.comparison.groups.letters if s.comparison is not None else {}
        metrics = summary_metrics()
        rows = []
        for row in r.table():
            iv = s.intervals.model(row.model) if s.intervals is not None else None
            rows.append([row.model, *([groups.get(row.model, "")] if groups else []),
                         *(_with_interval(m.read(row), getattr(iv, m.name, None), m.percent) for m in metrics)])
        out += ["### Summary", _md_table(["model", *(["group"] if groups else []), *(_header(m) for m in metrics)],
                                         rows)]
        shown = [metric(n) for n in CELL_METRICS]
        rows = []
        for m, c in r.all_cells():
            iv = s.intervals.cell(m.model, c.corruption, c.severity) if s.intervals is not None else None
            t = r.threat_of(c.corruption, c.severity)
            rows.append([m.model, "clean" if c.corruption == "clean" else f"{c.corruption}@{c.severity}",
                         *(_with_interval(x.read(c, t), getattr(iv, x.name, None) if x.name in CELL_INTERVALS else None,
                                          x.percent) for x in shown)])
        if s.costs:
            extra = _resource_headers(s.costs)
            out += ["### Cost beside robustness", _md_table(
                ["model", "images/s", "corrupted acc %", "Pareto-efficient", *extra],
                [[c.model, "n/a" if c.images_per_second is None else f"{c.images_per_second:,.0f}",
                  _num(c.corrupted_accuracy, percent=True), "yes" if c.pareto else "",
                  *(c.resource_columns().get(h, "n/a") for h in extra)] for c in s.costs])]
            if s.cost_sentence:
                out.append(s.cost_sentence[0].upper() + s.cost_sentence[1:] + ".")
        if s.class_ranks:
            out += ["### Where classes break first", _md_table(CLASS_HEADER, _class_rows(s)), CLASS_NOTE]
        out += ["### Per corruption and severity", _md_table(["model", "cell", *(_header(x) for x in shown)], rows)]
        if s.flips:
            out += ["### The most confident flips", _md_table(
                ["model", "cell", "image", "clean → corrupted", "confidence", "true"],
                [[f.model, f"{f.corruption}@{f.severity}", str(f.image), f"{f.clean_prediction} → {f.prediction}",
                  f"{100 * f.confidence:.0f} %", f.label] for f in s.flips])]
        out += ["### Caveats: what was not measured", *(f"- {_md_escape(c)}" for c in s.caveats)]
        fp = run.dataset.fingerprint if run.dataset is not None else None
        out.append(f"Data fingerprint: {fp.describe() if fp is not None else 'none recorded'}.")
    if len(sections) > 1:
        out.append("## Across the runs")
        out += ([v.sentence for v in across.verdicts] + [across.groups.sentence()] if across is not None
                else [f"No joint verdict: {why_not}"])
    out.append("Software: " + ", ".join(f"{k} {v}" for k, v in _versions().items()) + ".")
    return "\n\n".join(out) + "\n"


def write_report(store: Store, run_ids: Sequence[str], fmt: str = "html", confidence: float = 0.95) -> str:
    """The report of ``run_ids`` as text (``html`` or ``md``)."""
    if fmt not in ("html", "md"):
        raise UserInputError(f"--format {fmt!r} is not supported; use html or md")
    sections, across, why = build(store, run_ids, confidence, thumbnails=fmt == "html", figures=fmt == "html")
    return to_html(sections, across, why) if fmt == "html" else to_markdown(sections, across, why)
