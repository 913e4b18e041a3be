"""The ``domainbench`` command line: plan, run, ls, show, export, gallery, models, ui, worker, demo."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import subprocess
import sys
import time

#: when this module began importing: a run's start-up counts the imports and checks from here
#: to its engine (the interpreter's own start before it, ~0.1 s, is not counted)
_STARTED = time.perf_counter()
_MAIN_CALLS = 0

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # albumentations phones home on import
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never hang on a hub that cannot be reached

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperGroup

from domainbench.errors import UserInputError
from domainbench.runtime.literal import literal, markup_safe, printable
from domainbench.runtime.settings import Settings

if TYPE_CHECKING:
    from domainbench.metrics.comparison import Comparison
    from domainbench.metrics.confidence import RunIntervals
    from domainbench.records.report import RunReport

CONFIDENCE_HELP = "Confidence level of the intervals and tests, in (0, 1)."


@dataclass
class CliState:
    """What one invocation was told: set by the top-level callback before any command runs."""

    quiet: bool = False
    # read from the environment once per invocation; commands take what they need from here
    settings: Settings | None = None


STATE = CliState()


def _quiet_after_the_command(ctx: Any, param: Any, value: bool) -> None:
    if value:
        STATE.quiet = True


class _QuietAnywhere(TyperGroup):
    """Every command also accepts ``--quiet``: `domainbench run … --quiet` as `domainbench --quiet run …`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        quiet = next(p for p in self.params if p.name == "quiet")
        for command in self.commands.values():
            # the top-level option, cloned: same flags and help, but it sets STATE instead of
            # becoming an argument of the command's function
            option = copy.copy(quiet)
            option.expose_value = False
            option.callback = _quiet_after_the_command
            command.params.append(option)
        self.help = _help_literal(self.help)
        for command in self.commands.values():
            command.help = _help_literal(command.help)
            for p in command.params:
                if getattr(p, "help", None):
                    p.help = _help_literal(p.help)  # type: ignore[attr-defined]


def _help_literal(text: str | None) -> str | None:
    # typer renders help as rich markup: `pip install 'domainbench[ray]'` would lose its `[ray]`
    from rich.markup import escape

    return None if text is None else escape(text)


app = typer.Typer(
    name="domainbench",
    cls=_QuietAnywhere,
    help="Which vision-language model survives *my* images? Plan domain corruptions, evaluate models, compare.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# emoji=False: a run id `run:cat:1` or a model `openai-vlm:m:` must not print as `run🐱1` / `openai-vlmⓂ`
console = Console(emoji=False)
err_console = Console(stderr=True, soft_wrap=True, emoji=False)  # paths in messages must stay greppable

DEMO_DOMAIN = (
    "Product photos of clothing and shoes taken with cheap phone cameras in a dim warehouse: "
    "images are often noisy, blurred by hand shake, badly exposed, low contrast and heavily JPEG-compressed."
)


@app.callback()
def _main(quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or chatter (for scripts).")] = False) -> None:
    STATE.quiet = quiet
    STATE.settings = Settings.from_env()


def _settings() -> Settings:
    if STATE.settings is None:  # failed before the app's callback ran, or a command function called directly
        STATE.settings = Settings.from_env()
    return STATE.settings


def _csv(values: Optional[list[str]]) -> Optional[list[str]]:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


_MODEL_ARG = re.compile(r"(?P<name>.+):(?P<key>[A-Za-z_][A-Za-z0-9_]*)")


def _model_args(values: Optional[list[str]]) -> Optional[dict[str, dict[str, Any]]]:
    """``--model-arg NAME:key=value`` flags as {model: {key: value}} (lm-eval's ``--model_args``, per model).

    The model name may hold colons (``openai-vlm:llava:7b@http://host:11434/v1``): the key is the word after
    the last colon before the first ``=``. A key whose option is a list (``questions``) collects its
    repeats; the values are strings here, turned into the option's type by its backend's schema."""
    if not values:
        return None
    from domainbench.records.model_backends import MODEL_BACKENDS

    out: dict[str, dict[str, Any]] = {}
    for value in values:
        left, eq, text = value.partition("=")
        m = _MODEL_ARG.fullmatch(left.strip())
        if not eq or m is None:
            raise UserInputError(f"--model-arg {literal(value)}: write NAME:key=value, e.g. "
                                 "--model-arg hf-vlm:llava-hf/llava-1.5-7b-hf:mode=generate")
        name, key = m["name"], m["key"]
        prefix = name.partition(":")[0]
        field = MODEL_BACKENDS.get(prefix).options.model_fields.get(key) if prefix in MODEL_BACKENDS else None
        opts = out.setdefault(name, {})
        if field is not None and "list" in str(field.annotation):
            opts.setdefault(key, []).append(text)
        elif key in opts:
            raise UserInputError(f"--model-arg {literal(name)}:{key} is given twice; keep one value")
        else:
            opts[key] = text
    return out


def _say(text: str) -> None:
    if not STATE.quiet:
        err_console.print(text, highlight=False)


class RichEvents:
    """Engine events shown as one rich progress bar: units, images per second, time left."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.task: Any = None
        self.images = 0
        self.t0 = time.perf_counter()

    def start(self, total_units: int, done_units: int) -> None:
        if done_units:
            self.message(f"resuming: {done_units} of {total_units} units already stored, not recomputed")
        if self.progress is not None:
            self.task = self.progress.add_task("evaluating", total=total_units, completed=done_units, rate="")

    def advance(self, units: int, images: int) -> None:
        self.images += images
        if self.progress is not None and self.task is not None:
            rate = self.images / max(time.perf_counter() - self.t0, 1e-9)
            # a throttling endpoint's lowered concurrency (openai-vlm:), e.g. "endpoint 2/8 in flight"
            from domainbench.models.endpoint_transport import concurrency_note

            note = concurrency_note()
            self.progress.update(self.task, advance=units, rate=f"{rate:,.0f} img/s" + (f" · {note}" if note else ""))

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(printable(text, newlines=True), highlight=False, soft_wrap=True, markup=False)
        elif not STATE.quiet:
            err_console.print(printable(text, newlines=True), highlight=False, markup=False)


def _progress() -> Progress | None:
    if STATE.quiet:
        return None
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("units"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
    )


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{100 * v:.1f}" if pct else f"{v:.3f}"
    return str(v)


def summary_columns() -> list[Any]:
    """The summary table's metric columns: the registry's model metrics with a CLI header, in order."""
    from domainbench.metrics.registry import summary_metrics

    return summary_metrics()


def _ci(v: Any, interval: tuple[float, float] | None, pct: bool = False, approximate: bool = False) -> str:
    """A value with its interval's ends beside it, as the UI writes it: ``61.2 (55.0–67.1)`` (the header says %);
    ``*`` after it where the interval is approximate (few images per class, explained under the table)."""
    from domainbench.stats.written import interval_text

    if not isinstance(v, float) or interval is None:
        return _fmt(v, pct)
    return interval_text(v, interval, pct, unit=False, missing="n/a") + ("*" if approximate else "")


def summary_tables(headers: list[str], rows: list[tuple[str, list[str]]], width: int) -> list[Table]:
    """The summary as tables that fit ``width`` columns, each beginning with the model's name (never broken): a metric
    column is as wide as its longest word, so an interval ("(65.5–100.0)") wraps under its value, whole; the metric
    columns that do not fit go on in a table under the first, rather than folding an interval mid-number."""
    model = max((len(m) for m, _ in rows), default=5)

    def need(k: int) -> int:
        return max(len(w) for w in [*headers[k].split(), *(w for _, cells in rows for w in cells[k].split())])

    # a column costs its width and the space between columns (padding 1 on each side, the edges unpadded)
    groups: list[list[int]] = [[]]
    used = model
    for k in range(len(headers)):
        cost = need(k) + 2
        if groups[-1] and used + cost > width:
            groups.append([])
            used = model
        groups[-1].append(k)
        used += cost
    tables = []
    for group in groups:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        table.add_column("model", no_wrap=True, min_width=model)
        for k in group:
            table.add_column(headers[k], justify="right", overflow="fold", min_width=need(k))
        for name, cells in rows:
            table.add_row(name, *(cells[k] for k in group))
        tables.append(table)
    return tables


def print_report(report: RunReport, intervals: RunIntervals | None = None, verdicts: Comparison | None = None,
                 no_verdict: str | None = None) -> None:
    """The run's line, its ``verdicts`` first (the answer, where several models were compared), then the summary.
    ``no_verdict``: why several models have no verdict, said in its place."""
    from domainbench.metrics.registry import column_notes, summary_rows
    from domainbench.records.model_backends import capabilities_of
    from domainbench.stats.smoothed import FEW_IMAGES_NOTE

    console.print(f"[bold]run {markup_safe(report.run_id)}[/bold] — baseline {markup_safe(report.baseline)}", highlight=False)
    if verdicts is not None and verdicts.verdicts:
        print_verdicts(verdicts)
        print_groups(verdicts)
        console.print()
    elif no_verdict:
        console.print(literal(no_verdict), highlight=False, soft_wrap=True)
    columns = summary_columns()
    rows = []
    for row in summary_rows(report):
        iv = intervals.model(row.model) if intervals else None
        # a metric the statistics give an interval (ModelIntervals has a field of its name) shows it beside the value
        rows.append((literal(row.model), [_ci(m.read(row), getattr(iv, m.name, None), pct=m.percent,
                                              approximate=bool(iv and iv.approximate and m.interval == "smoothed"))
                                          for m in columns]))
    for table in summary_tables([m.cli_header for m in columns], rows, console.width):
        console.print(table)
    caps = {row.model: capabilities_of(row.model) for row in report.table()}
    remote = [m for m, c in caps.items() if c.remote and not c.image_embeddings]
    if remote and report.stability:
        console.print(f"stability: n/a (remote model) for {printable(', '.join(remote))}: an endpoint returns no image embeddings",
                      style="dim", markup=False, highlight=False)
    plain = [m for m, c in caps.items() if not c.remote and not c.image_embeddings]
    if plain and report.stability:
        console.print(f"stability: n/a for {printable(', '.join(plain))}: a plain classifier gives no image embeddings",
                      style="dim", markup=False, highlight=False)
    if intervals is not None and intervals.anytime_valid:
        console.print(f"(low–high): {100 * intervals.confidence:g} % anytime-valid confidence sequences (this run stopped its "
                      "cells adaptively): per cell top-1, balanced accuracy and flips by betting sequences over the images "
                      "in evaluation order; clean and mean accuracies from the cells' sequences (jointly, Bonferroni); "
                      "mCE, rCE and mFR are shown without one (no sequence bounds a ratio); see docs/reading-the-numbers.md",
                      style="dim", highlight=False)
    elif intervals is not None:
        console.print(f"(low–high): {100 * intervals.confidence:g} % intervals; accuracies and mCE/rCE/mFR: normal with a "
                      f"smoothed per-class variance ({intervals.resamples} multiplier draws, seed {intervals.seed}); "
                      "see docs/reading-the-numbers.md", style="dim", highlight=False)
    if intervals is not None:
        for note in intervals.notes:
            mark = "* " if note.startswith(FEW_IMAGES_NOTE) else ""
            console.print(f"{mark}{note}", markup=False, highlight=False)
    console.print(column_notes(columns, lambda m: m.cli_header), style="dim")
    if report.threat:
        print_threat(report)
    if report.fmr is not None:
        print_fmr(report)


def print_threat(report: RunReport) -> None:
    """The PD verdict of every cell, by the report's one definition: every unsafe and borderline cell named."""
    from domainbench.metrics.threat import UNSAFE_SHARE_CUT

    by = {k: [f"{t.corruption}@{t.severity}" for t in report.cells_by_safety(k)] for k in ("safe", "borderline", "unsafe")}
    scale = report.different_class_threat
    note = f" (different-class pairs average {scale:.2f})" if scale else ""
    console.print(f"PD threat: {len(by['safe'])} of {len(report.threat)} corruption cells safe, {len(by['borderline'])} "
                  f"borderline, {len(by['unsafe'])} unsafe{note}", markup=False, highlight=False)
    for kind in ("unsafe", "borderline"):
        if by[kind]:
            console.print(f"  {kind}: {printable(', '.join(by[kind]))}", markup=False, highlight=False)
    console.print(f"safe: the 95 % interval (Clopper–Pearson) of the share of a cell's images with PD threat above 1 lies "
                  f"below {100 * UNSAFE_SHARE_CUT:g} %; unsafe: above it; borderline: across it", style="dim",
                  highlight=False)


def print_fmr(report: RunReport) -> None:
    """The FMR section: per tested model the registry's FMR metrics (SA, PA, FMR, ...); the oracle's reliability."""
    from domainbench.metrics.registry import column_notes, format_value, metrics_of
    f = report.fmr
    assert f is not None
    console.print(f"[bold]FMR[/bold] — {f.search} search, budget {f.budget}, step {f.step_size:g}"
                  + (f", {f.candidates} candidates per step" if f.search == "greedy" else ""), highlight=False)
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    table.add_column("model", no_wrap=True)
    columns = [m for m in metrics_of("fmr") if m.cli_header]
    for col in ["n", *(m.cli_header for m in columns)]:
        table.add_column(col, justify="right", no_wrap=True)
    for m in f.models:
        table.add_row(literal(m.model), str(m.n), *(format_value(metric, metric.read(m)) for metric in columns))
    console.print(table)
    members = ", ".join(f"{markup_safe(k)} {_fmt(v, pct=True)}%" for k, v in f.oracle.member_accuracy.items())
    console.print(f"oracle: majority of {len(f.oracle.members)} agrees with the labels on {_fmt(f.oracle.clean_agreement, pct=True)}% "
                  f"of clean images (members: {members})", highlight=False)
    console.print(column_notes(columns, lambda m: m.display), style="dim")


def _store() -> Any:
    from domainbench.store import open_store

    settings = _settings()
    return open_store(settings.store_uri, settings.home)


# --------------------------------------------------------------------------- commands
@app.command()
def plan(
    text: Annotated[Optional[str], typer.Argument(help="The deployment domain in plain words (optional with --photos).")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the domain config TOML here.")] = None,
    samples: Annotated[int, typer.Option(help="LLM samples for the majority vote (the offline planner runs once).")] = 10,
    provider: Annotated[Optional[list[str]], typer.Option(help="auto | offline | openai | openai:MODEL[@BASE_URL] (auto: openai when DOMAINBENCH_LLM_BASE_URL or an API key is set). Repeat it to let several LLMs vote.")] = None,
    photos: Annotated[Optional[Path], typer.Option("--photos", help="A folder of unlabelled deployment photos: their noise, blur, JPEG quality, exposure, contrast, haze and colour cast are measured and matched by corruptions at fitted severities on the clean --dataset (default: the bundled sample).")] = None,
    preview: Annotated[bool, typer.Option("--preview", help="Also print the expected SSIM of each chosen severity on a sample image (1 = unchanged).")] = False,
    dataset: Annotated[Optional[str], typer.Option(help="The images the plan will run on: corruptions that leave them unchanged (colour on grayscale) are left out, with a note.")] = None,
    classes: Annotated[Optional[list[str]], typer.Option(help="Class names, for a --dataset folder without class folders.")] = None,
    explain: Annotated[Optional[str], typer.Option("--explain", metavar="PLAN", help="Print why each corruption of PLAN (a plan TOML or a stored plan id) is in, why notable ones are out, and what the plan rests on; plans nothing.")] = None,
) -> None:
    """Choose the corruptions a domain produces, with severities and a reason for each."""
    if explain is not None:
        if text is not None or photos is not None:
            raise UserInputError("plan --explain reads a plan that exists: give it alone, e.g. "
                                 "domainbench plan --explain plan.toml (a plan id that `plan` printed, or a run id)")
        print_explanation(_plan_to_explain(explain))
        return
    from domainbench.records.config import dumps, save
    from domainbench.planner import plan as make_plan

    if output:  # a device file, FIFO or folder is refused before the planner runs or the store is written
        from domainbench.runtime.safe_output import output_file

        output_file(output)
    providers = provider or ["auto"]
    if text is None and photos is None:
        raise UserInputError("plan needs a domain description, --photos DIR, or both; e.g. "
                             'domainbench plan "dash-cam footage at night" --photos ./my_photos')
    probe = None
    if dataset:  # opened before the planner runs: a bad path is refused at once
        from domainbench.planner.image_fit import fit_to_images, probe_images

        probe = probe_images(dataset, _csv(classes))
    fitted = None
    if photos is not None:  # measured before the planner runs: a folder with no image is refused at once
        from domainbench.planner import photo_fit

        _say("measuring the deployment photos against the clean images …")
        fitted = photo_fit.measure(photos, dataset or "sample")
        for w in fitted.warnings:
            err_console.print(f"warning: {literal(w)}", style="yellow", highlight=False)
    cfg = None
    if text is not None:
        _say(f"planning with provider={', '.join(providers)} …")
        cfg = make_plan(text, provider=providers, samples=samples, llm=_settings().llm_settings())
    if fitted is not None:
        cfg = photo_fit.to_plan(fitted.photos, fitted.ref, cfg=cfg, source=f"deployment photos in {photos.name or photos}")
    if probe is not None:
        cfg = fit_to_images(cfg, *probe)
    if probe is not None or fitted is not None or cfg.planner.provider == "council":
        for note in cfg.planner.violations:
            err_console.print(literal(note), style="yellow", highlight=False)
    plan_id = _store().domains.save(cfg, created_at=cfg.planner.created_at)
    _say(f"stored as plan {plan_id} (`domainbench plan --explain {plan_id}` says why each corruption is in)")
    if output:
        save(cfg, output)
        _say(f"wrote {markup_safe(output)}")
    else:
        console.print(dumps(cfg), highlight=False, markup=False, soft_wrap=True)  # TOML: a folded line breaks it
    if not STATE.quiet:
        t = Table(title="chosen corruptions")
        for col in ("corruption", "severities", "reason"):
            t.add_column(col)
        for c in cfg.corruptions:
            t.add_row(literal(c.name), ",".join(map(str, c.severities)), literal(c.reason))
        err_console.print(t)
        if cfg.compositions:
            t = Table(title="proposed compositions (each one cell, its steps applied in order)")
            for col in ("cell", "steps", "reason"):
                t.add_column(col)
            for comp in cfg.compositions:
                t.add_row(literal(comp.cell_name), literal(" → ".join(f"{c} s{s}" for c, s in comp.pairs)), literal(comp.reason))
            err_console.print(t)
    if preview:
        print_preview(cfg)


def _plan_to_explain(spec: str) -> Any:
    """A plan TOML, the stored plan whose id is ``spec``, or the plan of the run ``spec``."""
    from domainbench.records.config import load_domain

    path = Path(spec)
    if path.is_file():
        return load_domain(path)
    store = _store()
    found = store.domains.get(domain_id=spec)
    if found is not None:
        return found.config()
    run = store.runs.get(run_id=spec)
    if run is not None:
        return run.domain
    raise UserInputError(f"--explain {spec!r}: no such plan file, stored plan id or run id; give the TOML that "
                         "`plan -o` wrote, the plan id `plan` printed, or a run id from `domainbench ls`")


def print_explanation(cfg: Any) -> None:
    from domainbench.planner.audit import explain

    ex = explain(cfg)
    console.print(f"domain: {literal(ex.domain)}", highlight=False)
    t = Table(title="in: why each corruption was chosen", box=box.SIMPLE_HEAD)
    for col in ("corruption", "severities", "rests on"):
        t.add_column(col, overflow="fold")
    for c in ex.chosen:
        t.add_row(literal(c.name), ",".join(map(str, c.severities)), literal(c.why))
    console.print(t)
    t = Table(title="out: why notable corruptions were not chosen", box=box.SIMPLE_HEAD)
    for col in ("corruption", "why not"):
        t.add_column(col, overflow="fold")
    for c in ex.left_out:
        t.add_row(literal(c.name), literal(c.why))
    console.print(t)
    t = Table(title="provenance", box=box.SIMPLE_HEAD, show_header=False)
    t.add_column("", style="bold")
    t.add_column("", overflow="fold")
    for k, v in ex.provenance:
        t.add_row(k, literal(v))
    console.print(t)
    for note in ex.notes:
        console.print(f"note: {literal(note)}", highlight=False, style="dim")


def print_preview(cfg: Any) -> None:
    """The expected damage of each planned cell on the sample image the UI's preview opens on (stderr: stdout holds the plan)."""
    from domainbench.metrics.ladder import expected_damage, first_of_each_class, sample_image

    cls, index = next(iter(first_of_each_class().items()))
    t = Table(title=f"expected damage on a sample image (class {literal(cls)}, image {index})", box=box.SIMPLE_HEAD)
    for col in ("cell", "severity", "SSIM"):
        t.add_column(col, justify="left" if col == "cell" else "right")
    for row in expected_damage(cfg, sample_image(index)):
        t.add_row(literal(row.cell), str(row.severity), f"{row.ssim:.2f}" + (" (no effect)" if row.no_effect else ""))
    err_console.print(t)
    err_console.print("SSIM against the clean image: 1 = unchanged, lower = more damage; severities of different "
                      "corruptions compare by it, not by their numbers", style="dim", highlight=False)


@app.command()
def run(
    config: Annotated[Optional[Path], typer.Argument(help="Domain config TOML (from `domainbench plan -o`).")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--models", "-m", help="Model names, comma-separated or repeated (e.g. embedded:fmnist-plain, open_clip:ViT-B-32/openai).")] = None,
    dataset: Annotated[Optional[str], typer.Option(help="`sample`, a folder of class folders, a CSV manifest or an image folder.")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline model for mCE/rCE/mFR (default: the first model).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Evaluate N images taken class by class in turn (each class's 1st image, then each class's 2nd, ...), so every class is seen once N reaches the number of classes; fewer than 5 per class makes balanced-accuracy intervals approximate.")] = None,
    resume: Annotated[Optional[str], typer.Option(help="Continue run RUN: finished units are not recomputed.")] = None,
    run_config: Annotated[Optional[Path], typer.Option("--run-config", help="Run config TOML; flags override it.")] = None,
    classes: Annotated[Optional[list[str]], typer.Option(help="Class names (needed for an unlabeled folder), or imagenet1k: the 1,000 ImageNet names of CLIP's zero-shot evaluation.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of every corruption's random parameters.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Images per forward pass (halved automatically on GPU out-of-memory).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda | cuda:N")] = None,
    workers: Annotated[Optional[int], typer.Option(help="Worker processes that decode and corrupt images (default: one per core, at most 8; models on a CPU: two cores fewer; 0 = in this process).")] = None,
    corrupt_on: Annotated[Optional[str], typer.Option("--corrupt-on", help="auto | cpu | device: corrupt with the torch kernels on the models' device (auto: when it is a GPU).")] = None,
    corruptions_module: Annotated[Optional[list[str]], typer.Option("--corruptions-module", help="Import a module that registers extra corruptions.")] = None,
    stability: Annotated[Optional[bool], typer.Option("--stability/--no-stability", help="Measure embedding stability.")] = None,
    threat: Annotated[Optional[bool], typer.Option("--threat/--no-threat", help="Measure the PD threat of each corruption.")] = None,
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Id for the new run (default: time + domain).")] = None,
    template: Annotated[Optional[list[str]], typer.Option("--template", help="Zero-shot prompt template with {} for the class (repeat for an ensemble), or a built-in set: openai80 (CLIP's 80 ImageNet templates), simple.")] = None,
    model_arg: Annotated[Optional[list[str]], typer.Option("--model-arg", metavar="NAME:KEY=VALUE", help="An option of one model, checked against its backend's options (repeatable; `domainbench models --backends` lists them), e.g. hf-vlm:llava-hf/llava-1.5-7b-hf:mode=generate.")] = None,
    question: Annotated[Optional[list[str]], typer.Option("--question", help="Generative VLMs: the question asked about each image (repeat for an ensemble).")] = None,
    vlm_mode: Annotated[Optional[str], typer.Option("--vlm-mode", help="Generative VLMs: loglik (score every class name), generate (parse a free answer) or choice (lettered options, endpoints with logprobs).")] = None,
    vlm_score: Annotated[Optional[str], typer.Option("--vlm-score", help="Generative VLMs: sum or mean of the class name's token log-probabilities.")] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="Generative VLMs: auto (bf16/fp16 on GPU, float32 on CPU), float32, float16, bfloat16.")] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", help="openai-vlm: requests in flight at once (default 8).")] = None,
    max_requests: Annotated[Optional[int], typer.Option("--max-requests", help="openai-vlm: stop (resumably) after this many requests: a cost guard.")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="openai-vlm: environment variable holding the API key (default OPENAI_API_KEY).")] = None,
    request_timeout: Annotated[Optional[float], typer.Option("--request-timeout", help="openai-vlm: seconds one request may take in total before it is retried (default 60).")] = None,
    retry_budget: Annotated[Optional[float], typer.Option("--retry-budget", help="openai-vlm: seconds one request may keep retrying 429, 5xx and timeouts before the run stops resumably (default 1800).")] = None,
    executor: Annotated[Optional[str], typer.Option(help="local (this process) or ray (Ray tasks and GPU actors; pip install 'domainbench[ray]'); default $DOMAINBENCH_EXECUTOR or local.")] = None,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster: auto, HOST:6379 or ray://HOST:10001 (default: $DOMAINBENCH_RAY_ADDRESS, else a new local Ray instance).")] = None,
    actors: Annotated[Optional[int], typer.Option(help="Ray model actors per model group (default: the cluster's GPUs shared out over the groups, 1 without GPUs).")] = None,
    gpus_per_actor: Annotated[Optional[float], typer.Option(help="GPUs per Ray model actor (default: 1 when the cluster has GPUs).")] = None,
    cpus_per_task: Annotated[float, typer.Option(help="CPUs per Ray corruption task.")] = 1.0,
    models_per_actor: Annotated[Optional[int], typer.Option(help="Models one Ray actor holds (default: all; lower it when they do not fit on one GPU).")] = None,
    adaptive: Annotated[Optional[bool], typer.Option("--adaptive", help="Evaluate in random rounds; stop each cell once its anytime-valid interval is narrow enough or its model pairs are decided.")] = None,
    target_width: Annotated[Optional[float], typer.Option("--target-width", help="With --adaptive: the width a cell's top-1 accuracy interval must reach (default 0.1).")] = None,
    breaking_point: Annotated[Optional[str], typer.Option("--breaking-point", metavar="[THRESHOLD]", help="Find where each model's balanced accuracy falls below THRESHOLD on each corruption's continuous scale (default: halfway between clean and chance).")] = None,
    skip_unreadable: Annotated[Optional[bool], typer.Option("--skip-unreadable", help="Skip image files that do not decode (counted and listed in the run) instead of refusing the dataset; with --resume, go on past the file that stopped the run.")] = None,
    shift: Annotated[Optional[list[str]], typer.Option("--shift", metavar="NAME=PATH", help="Also evaluate your own shifted images as the cell shift:NAME (repeatable): class folders named like the dataset's classes, or files named like its files.")] = None,
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", help="--task vqa: generative models' answers are at most this many new tokens (default 16).")] = None,
    task: Annotated[Optional[str], typer.Option("--task", help="classification (default), vqa or retrieval: VQA and retrieval read a task manifest as --dataset (docs/tasks.md).")] = None,
    frames: Annotated[Optional[int], typer.Option("--frames", help="Clips: frames sampled evenly over each clip's duration (default 8; docs/video.md).")] = None,
    fps: Annotated[Optional[float], typer.Option("--fps", help="Clips: sample frames at this rate instead of --frames (with --max-frames).")] = None,
    max_frames: Annotated[Optional[int], typer.Option("--max-frames", help="Clips with --fps: at most this many frames per clip.")] = None,
) -> None:
    """Evaluate models zero-shot on a dataset (images or clips) under a domain's corruptions."""
    from domainbench import api, query

    _load_plugins(corruptions_module)
    settings = _settings()
    exec_options = _executor_options(executor or settings.executor, address or settings.ray_address, actors, gpus_per_actor,
                                     cpus_per_task, _csv(corruptions_module), models_per_actor)
    if not resume:  # the inputs are checked before the store is opened or a progress bar drawn
        if config is None:
            raise UserInputError("run needs a domain config TOML (make one with `domainbench plan \"...\" -o domain.toml`) or --resume RUN")
        notes: list[str] = []
        domain = api.load_plan(config, shifts=shift, notes=notes)
        for note in notes:
            _say(markup_safe(note))
        cfg_notes: list[str] = []
        cfg = api.build_run_config(run_config, notes=cfg_notes, **{
            "models": _csv(models), "dataset": dataset, "baseline": baseline, "limit": limit, "classes": _csv(classes),
            "seed": seed, "batch_size": batch_size, "device": device, "workers": workers,
            "corrupt_on": corrupt_on, "stability": stability, "threat": threat, "templates": template,
            "questions": question, "vlm_mode": vlm_mode, "vlm_score": vlm_score, "dtype": dtype,
            "concurrency": concurrency, "max_requests": max_requests, "api_key_env": api_key_env,
            "request_timeout": request_timeout, "retry_budget": retry_budget,
            "adaptive": adaptive, "target_width": target_width,
            "breaking_point": True if breaking_point is not None else None, "breaking_threshold": _threshold(breaking_point),
            "skip_unreadable": skip_unreadable, "model_args": _model_args(model_arg), "task": task,
            "max_new_tokens": max_new_tokens,
        })
        for note in cfg_notes:
            _say(markup_safe(note))
        if model_arg:
            from domainbench.service.launch import check_model_args

            check_model_args(_model_args(model_arg) or {}, cfg.models)
    else:
        _refuse_ignored_on_resume(resume, {
            "a domain config": config, "--models": models, "--dataset": dataset, "--baseline": baseline,
            "--limit": limit, "--run-config": run_config, "--classes": classes, "--seed": seed,
            "--batch-size": batch_size, "--device": device, "--workers": workers, "--corrupt-on": corrupt_on,
            "--stability/--no-stability": stability, "--threat/--no-threat": threat, "--run-id": run_id,
            "--template": template, "--question": question, "--vlm-mode": vlm_mode, "--vlm-score": vlm_score,
            "--dtype": dtype, "--adaptive": adaptive, "--target-width": target_width,
            "--breaking-point": breaking_point, "--shift": shift, "--model-arg": model_arg, "--task": task,
            "--max-new-tokens": max_new_tokens, "--frames": frames, "--fps": fps, "--max-frames": max_frames})
        endpoint = _endpoint_overrides(concurrency, max_requests, api_key_env, request_timeout, retry_budget)
        if _run_clips(None, None, resume, exec_options, None):
            return
    if not resume and cfg.task != "classification":
        _run_task(domain, cfg, run_id, exec_options)
        return
    if not resume:
        from domainbench.data.clips import Sampling, is_clip_dataset

        if frames is not None or fps is not None or max_frames is not None or is_clip_dataset(cfg.dataset):
            _run_clips(domain, cfg, run_id, exec_options, Sampling(frames, fps, max_frames, cfg.seed).check())
            return
        from domainbench.engine.clip_kind import left_out_note, still_image_plan

        domain, temporal = still_image_plan(domain)
        if temporal:
            _say(markup_safe(left_out_note(temporal)))
    store = _store()
    progress = _progress()
    from domainbench.engine.timings import STARTUP

    def evaluate(engine: Any) -> str:
        # the start-up's first stage: this process's imports and checks up to the engine
        engine.startup.add(STARTUP, "imports", time.perf_counter() - _STARTED)
        return (engine.resume(resume, bool(skip_unreadable), endpoint=_endpoint_options(engine.store, resume, endpoint))
                if resume else engine.start(domain, cfg, run_id=run_id))

    with progress or contextlib.nullcontext():
        # the Python API's path (domainbench.run / resume), with this command's progress bar
        done = api.run_plan(store, evaluate, executor=exec_options, events=RichEvents(progress))
    run_id, s = done.id, done.stats
    assert s is not None
    task_run = _task_run(store, run_id, 0.95) if resume else None
    if task_run is not None:  # a resumed VQA or retrieval run
        from domainbench.query.task_output import print_task_result

        _say(f"run {markup_safe(run_id)}: {s.computed_units} units computed, {s.skipped_units} already stored, "
             f"{done.seconds:.1f} s")
        print_task_result(console, task_run)
        return
    _say(f"run {markup_safe(run_id)}: {s.computed_units} units computed, {s.skipped_units} already stored, "
         f"{len(s.unreadable)} unreadable images, {done.seconds:.1f} s")
    report = query.report(store, run_id)  # the engine stored it as the run finished
    verdicts = None
    if len(report.model_names) > 1 and report.models[0].labeled:
        try:  # the answer first; a run whose per-image outcomes cannot be paired still prints its summary
            verdicts = query.comparison(store, [run_id])
        except ValueError as e:  # UserInputError / MetricInputError: say why, keep the summary
            _say(f"no verdict: {markup_safe(str(e))}")
    print_report(report, None, verdicts)
    print_shift_matches(report, store)
    print_timings(store.get_run(run_id))


def _run_task(domain: Any, cfg: Any, run_id: Optional[str], exec_options: Any) -> None:
    """``run --task vqa|retrieval``: evaluated, then stored and printed (``domainbench.engine.task_kind``)."""
    from domainbench import api
    from domainbench.query.task_output import print_task_result
    from domainbench.engine.task_kind import check_task_options, load_task_run

    check_task_options(domain, cfg, exec_options.kind)  # before the store is opened
    store = _store()
    done = api.run_task(store, domain, cfg, run_id=run_id, executor=exec_options)
    _say(f"run {markup_safe(done.id)}: {cfg.task} on {len(cfg.models)} model(s), {done.seconds:.1f} s")
    print_task_result(console, load_task_run(store, done.id))


def _run_clips(domain: Any, cfg: Any, run_id: Optional[str], exec_options: Any, sampling: Any) -> bool:
    """A clip run started (``sampling`` given) or resumed (``run_id`` of a stored clip run), then printed; False
    for a resume of another kind of run (``domainbench.engine.clip_kind``)."""
    from domainbench.engine.clip_kind import check_clip_options, load_clip_run, resume_clip_run, start_clip_run
    from domainbench.engine.clip_output import print_clip_result

    started = time.perf_counter()
    if sampling is None:
        store = _store()
        stored = store.get_run(run_id) if run_id else None
        if stored is None or stored.kind != "clip":
            return False
        check_clip_options(stored.domain, stored.config, exec_options.kind)
        rid = resume_clip_run(store, stored.run_id, say=lambda m: _say(markup_safe(m)), executor=exec_options)
    else:
        check_clip_options(domain, cfg, exec_options.kind)  # before the store is opened
        store = _store()
        rid = start_clip_run(store, domain, cfg, sampling, run_id, say=lambda m: _say(markup_safe(m)),
                             executor=exec_options)
    result = load_clip_run(store, rid)
    _say(f"run {markup_safe(rid)}: clips on {len(result.run.config.models)} model(s), "
         f"{time.perf_counter() - started:.1f} s")
    print_clip_result(console, result)
    return True


def _clip_run(store: Any, run_id: str, confidence: float) -> Any:
    """The stored clip run ``run_id`` (None for another kind); its intervals are stored at 95%."""
    run = store.get_run(run_id)
    if run is None or run.kind != "clip":
        return None
    from domainbench.engine.clip_kind import load_clip_run

    if confidence != 0.95:
        raise UserInputError(f"--confidence {confidence}: run {run_id} stored its intervals at 0.95; leave out --confidence")
    return load_clip_run(store, run_id)


def _task_run(store: Any, run_id: str, confidence: float) -> Any:
    """The stored task run ``run_id`` (None for a classification run), its intervals at ``confidence``."""
    run = store.get_run(run_id)
    # the kind's name read off the record: importing engine.task_kind registers the kinds (torch), and a read
    # command of a classification run loads no model stack
    if run is None or run.kind not in ("vqa", "retrieval"):
        return None
    from domainbench.engine.task_kind import load_task_run

    return load_task_run(store, run_id, confidence)


def _refuse_ignored_on_resume(run_id: str, given: dict[str, Any]) -> None:
    """A resume evaluates the run as it was stored: a flag that would change it is refused, not ignored."""
    named = [name for name, value in given.items() if value not in (None, [], ())]
    if named:
        raise UserInputError(
            f"--resume {literal(run_id)} continues the run with its stored plan, dataset, models and settings; "
            f"leave out {', '.join(named)} (or start a new run with them)")


def _endpoint_overrides(concurrency: Optional[int], max_requests: Optional[int], api_key_env: Optional[str],
                        request_timeout: Optional[float], retry_budget: Optional[float]) -> dict[str, Any]:
    """openai-vlm transport flags given with --resume: they change how requests travel, never a result."""
    from pydantic import ValidationError

    from domainbench.records.config import RunConfig
    from domainbench.errors import first_validation_error

    given = {k: v for k, v in {"concurrency": concurrency, "max_requests": max_requests, "api_key_env": api_key_env,
                               "request_timeout": request_timeout, "retry_budget": retry_budget}.items() if v is not None}
    try:
        RunConfig(**given)
    except ValidationError as e:
        loc, msg = first_validation_error(e)
        raise UserInputError(f"--{loc.replace('_', '-')}: {msg}") from None
    return given


def _endpoint_options(store: Any, run_id: str, flags: dict[str, Any]) -> dict[str, Any] | None:
    """The stored run's per-model options with the transport flags of this session on top (each model
    whose backend takes them), as the update of its config; None when there is nothing to change."""
    from domainbench.records.config import apply_legacy_fields

    run = store.get_run(run_id) if flags else None
    if run is None:  # no flags, or no such run (resume says so)
        return None
    mapped = apply_legacy_fields({"models": run.config.models, "model_args": run.config.model_args, **flags}, override=True)
    return {"model_args": mapped["model_args"]}


def _threshold(value: Optional[str]) -> Optional[float]:
    """--breaking-point's THRESHOLD: None for the default (the flag alone), else a number in (0, 1)."""
    if value is None or value == "auto":
        return None
    try:
        return float(value)
    except ValueError:
        raise UserInputError(f"--breaking-point: THRESHOLD must be a balanced accuracy between 0 and 1 (e.g. 0.5), got {value!r}") from None


def _executor_options(kind: str, address: Optional[str], actors: Optional[int], gpus_per_actor: Optional[float],
                      cpus_per_task: float, modules: Optional[list[str]], models_per_actor: Optional[int] = None) -> Any:
    """The run's executor options, checked before anything is opened (errors name the flag)."""
    from domainbench import api

    return api.executor_options(kind, address=address, actors=actors, gpus_per_actor=gpus_per_actor,
                                cpus_per_task=cpus_per_task, modules=modules, models_per_actor=models_per_actor)


def _load_plugins(modules: Optional[list[str]]) -> None:
    from domainbench import corruptions
    for m in _csv(modules) or []:
        try:
            corruptions.load_module(m)
        except ImportError as e:
            raise UserInputError(f"--corruptions-module {m}: cannot import it ({e}); check the module name and PYTHONPATH") from e


@app.command("ls")
def list_runs() -> None:
    """List stored runs, newest first."""
    from domainbench.store.readable import readable_runs

    store = _store()
    runs, problems = readable_runs(store)
    for problem in problems:
        err_console.print(f"warning: {printable(problem)}", highlight=False, markup=False, soft_wrap=True)
    table = Table(title=literal(f"runs in {store.description}"))
    # the run id is what a user copies: first, never wrapped or cut (as wide as the longest); the rest fold
    table.add_column("run", no_wrap=True, min_width=max((len(literal(r.run_id)) for r in runs), default=3))
    for col in ("status", "domain", "models", "dataset", "created"):
        table.add_column(col, overflow="fold")
    from domainbench.store.status import run_status

    for r in runs:
        table.add_row(*(literal(v) for v in (r.run_id, run_status(r), r.domain.domain[:50], ", ".join(r.config.models),
                                             r.dataset.name if r.dataset else r.config.dataset, r.created_at)))
    console.print(table)


@app.command("rm")
def remove_runs(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN...", help="Run ids (see `domainbench ls`).")],
    force: Annotated[bool, typer.Option("--force", help="Also delete a run that is running.")] = False,
) -> None:
    """Delete runs with their units, stability, threat and FMR records (their planned domains stay)."""
    from domainbench.store.removal import delete_runs

    for run_id, counts in delete_runs(_store(), run_ids, force).items():
        if not STATE.quiet:  # run ids are shown literally, never as markup
            err_console.print(f"deleted run {printable(run_id)} ({counts.get('units', 0)} units, {sum(counts.values())} records)",
                              highlight=False, markup=False)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    baseline: Annotated[Optional[str], typer.Option(help="Recompute mCE/rCE/mFR against another model of the run.")] = None,
    confidence: Annotated[float, typer.Option(help=CONFIDENCE_HELP)] = 0.95,
    details: Annotated[bool, typer.Option("--details", help="Also list every cell ordered by damage (SSIM).")] = False,
) -> None:
    """Print a run's verdicts (several models), then its summary table with intervals (recomputed from stored statistics),
    then the details."""
    from domainbench import query
    from domainbench.stats.intervals import check_confidence

    check_confidence(confidence)
    store = _store()
    task_run = _task_run(store, run_id, confidence)
    if task_run is not None:
        from domainbench.query.task_output import print_task_result

        print_task_result(console, task_run)
        return
    clip_run = _clip_run(store, run_id, confidence)
    if clip_run is not None:
        from domainbench.engine.clip_output import print_clip_result

        print_clip_result(console, clip_run)
        return
    report = query.report(store, run_id, baseline)
    read = query.outcomes_once()  # the intervals and the verdicts: the run's units read once
    paired = len(report.model_names) > 1 and report.models[0].labeled
    # a run that cannot be paired image by image still has its summary: the verdict's absence is said, not an error
    gap = query.per_image_gap(store, run_id, read) if paired else None
    verdicts = query.comparison(store, [run_id], confidence=confidence, read=read) if paired and gap is None else None
    no_verdict = (None if gap is None else f"no paired verdict (it needs per-image predictions): {gap}; the summary "
                  "below is computed from the stored counts")
    print_report(report, query.intervals(store, report, confidence, read), verdicts, no_verdict)
    if gap is None:  # the real-shift sentence pairs models image by image too
        print_shift_matches(report, store, confidence, read)
    from domainbench.metrics.damage_report import damage_line

    if details:
        print_damage(report)
    elif damage_line(report) is not None:  # one line of every cell: a detail, not the answer
        console.print(f"every cell ordered by damage: domainbench show {literal(run_id)} --details", style="dim",
                      markup=False, highlight=False)
    print_question_spread(store, run_id)
    run = store.get_run(run_id)
    if run is not None and run.breaking_points:
        print_breaking_points(run.breaking_points)
    print_unreadable(run)
    print_timings(run)
    print_cost(run, report, verdicts)


def print_shift_matches(report: RunReport, store: Any, confidence: float = 0.95, read: Any = None) -> None:
    """Per real-shift cell (``--shift``): the models on the user's own images, with intervals and the paired test,
    and the synthetic cell that behaves most like them (``query.real_shift``: the run page's sentence)."""
    from domainbench import query

    for r in query.real_shift(store, report, confidence, *([read] if read is not None else [])):
        console.print(literal(r.sentence), highlight=False)


def print_damage(report: RunReport) -> None:
    """The cells ordered by damage (SSIM), not by severity number: severities differ across corruptions."""
    from domainbench.metrics.damage_report import damage_line

    line = damage_line(report)
    if line is not None:
        console.print(printable(line), style="dim", markup=False, highlight=False)  # cell names: ESC, newlines


def print_unreadable(run: Any) -> None:
    """The image files a run skipped (--skip-unreadable): how many, and the first few paths."""
    n = run.n_unreadable if run is not None else None
    if n:
        shown = ", ".join(run.unreadable[:3]) + (", …" if n > 3 else "")
        console.print(literal(f"{n} unreadable image file{'s' if n != 1 else ''} skipped: {shown}"), highlight=False)


def print_timings(run: Any) -> None:
    """Seconds per stage of the run, per model (``domainbench.engine.timings``), under its summary."""
    from domainbench.engine.timings import timing_lines

    for line in timing_lines(run.timings if run is not None else {}):
        console.print(literal(line), style="dim", highlight=False)


def print_cost(run: Any, report: RunReport, comparison: Comparison | None) -> None:
    """Throughput beside robustness, inside the timings block (its numbers are this machine's): images/s per model,
    the Pareto-efficient ones, and the fastest model the data cannot tell from the best."""
    from domainbench.metrics.cost import fastest_not_worse, model_costs

    timings = run.timings if run is not None else {}
    if not any(m in timings for m in report.model_names):
        return
    accuracy = (comparison.groups.accuracy if comparison is not None
                else {m.model: m.mean_corrupted_accuracy for m in report.models})
    costs = model_costs(timings, report.model_names, accuracy)
    parts = [f"{c.model} {c.images_per_second:,.0f}" + (" (Pareto)" if c.pareto else "")
             for c in costs if c.images_per_second is not None]
    # folded at the terminal's width (a model name is never broken: rich folds between words)
    console.print(literal("  images/s (preprocess + forward, this machine): " + ", ".join(parts)), style="dim",
                  highlight=False, markup=False)
    sentence = fastest_not_worse(costs, comparison)
    if sentence:
        console.print(literal(f"  {sentence}"), style="dim", highlight=False, markup=False)
    for c in costs:  # what the run measured besides time (engine.resources), one line per model that has any
        if columns := c.resource_columns():
            # never folded: a continuation line would fall out of the indented timings block
            console.print(literal(f"  {c.model}: " + ", ".join(f"{k} {v}" for k, v in columns.items())), style="dim",
                          highlight=False, markup=False, soft_wrap=True)


def print_question_spread(store: Any, run_id: str) -> None:
    """Prompt sensitivity of generative models asked several --question (nothing otherwise)."""
    from domainbench.engine.vlm_units import question_spread

    questions, rows = question_spread(store, run_id)
    if not rows:
        return
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    for col in ("model", "cell", *[f"Q{k + 1}%" for k in range(len(questions))], "spread"):
        table.add_column(col, justify="left" if col in ("model", "cell") else "right", no_wrap=True)
    for r in rows:
        table.add_row(literal(r["model"]), literal(f"{r['corruption']}@{r['severity']}"),
                      *[_fmt(a, pct=True) for a in r["accuracy"]], _fmt(r["spread"], pct=True))
    console.print(table)
    for k, q in enumerate(questions):
        console.print(f"Q{k + 1}: {printable(q)}", style="dim", markup=False, highlight=False)
    console.print("prompt sensitivity: top-1 accuracy under each question alone; spread = max - min (points)",
                  style="dim")


def print_breaking_points(points: list[Any]) -> None:
    """Per model and corruption: where on the continuous scale (0 weakest, 1 strongest) accuracy breaks."""
    levels = sorted({b.confidence for b in points})
    level = f"{100 * levels[0]:g} % interval" if len(levels) == 1 else "interval"
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    for col in ("model", "corruption", "below", "breaks at", level):
        table.add_column(col, justify="left" if col in ("model", "corruption") else "right", no_wrap=True)
    for b in points:
        where = "never" if b.breaking_point is None else f"{b.breaking_point:.3f}"
        iv = ("n/a" if b.breaking_point_ci_low is None else
              f"{b.breaking_point_ci_low:.3f}–{'>1' if b.breaking_point_ci_high is None else f'{b.breaking_point_ci_high:.3f}'}")
        table.add_row(literal(b.model), literal(b.corruption), f"{100 * b.threshold:.1f}%", where, iv)
    console.print(table)
    sources = {(b.threshold_model, b.threshold) for b in points}
    if len(sources) == 1:
        source, threshold = next(iter(sources))
        rule = (f"one threshold for every model, {100 * threshold:.1f} %: "
                + (f"halfway from the baseline {source}'s clean balanced accuracy to chance" if source else "as given"))
    else:
        rule = "thresholds differ between models (a run from before the threshold was shared)"
    first = points[0] if points else None
    sample = (f"{first.n_images} images of {first.n_classes} classes, a seeded sample stratified by class"
              if first is not None and first.n_classes is not None else "")
    console.print(markup_safe(
        f"breaking point: where balanced accuracy falls below the threshold on the corruption's continuous scale (0 weakest, "
        f"1 strongest), by bisection; {rule}" + (f"; {sample}" if sample else "")
        + "; interval: from the strongest point whose accuracy interval (bootstrap, stratified by class) lies above the "
        "threshold to the weakest whose interval lies below it; see docs/reading-the-numbers.md"), style="dim")


def print_verdicts(comparison: Comparison) -> None:
    for v in comparison.verdicts:
        console.print(markup_safe(v.sentence), highlight=False)


def _p(value: float) -> str:
    """A p-value as the verdict sentences write it: three significant digits, "<0.001" below 0.001 (the JSON keeps it
    exact), so a p column stays six characters wide and fits an 80-column terminal whole."""
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def print_groups(comparison: Comparison) -> None:
    """The tied groups (compact letter display) of the verdicts: which models the data cannot tell apart."""
    console.print(literal(comparison.groups.sentence()), highlight=False)


def print_pairs(comparison: Comparison) -> None:
    """Per pair and cell: McNemar's discordant counts and p-values, the difference with its interval."""
    level = f"{100 * comparison.confidence:g}% CI"
    by_pair: dict[tuple[str, str], list[Any]] = {}
    for p in comparison.pairs:
        by_pair.setdefault((p.model_a, p.model_b), []).append(p)
    # one table per pair under a line naming A and B in full: two model names per row left no room at 80 columns,
    # and names or p-values were cut to "…"; the cell is never wrapped, a number column's header and the
    # interval ("+2.4 to +14.4") wrap at their spaces, never inside a number
    for (a, b), pairs in by_pair.items():
        console.print(f"A = {literal(a)}, B = {literal(b)}", highlight=False)
        rows = [[literal(f"{p.corruption}@{p.severity}"), str(p.n), str(p.a_only), str(p.b_only), _p(p.p_value),
                 _p(p.p_holm), f"{100 * p.difference:+.1f}", f"{100 * p.ci_low:+.1f} to {100 * p.ci_high:+.1f}",
                 _p(p.p_balanced), _p(p.p_balanced_holm)] for p in pairs]
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        # two-line headers: a header wider than its numbers would take the room a number needs
        for k, col in enumerate(("cell", "n", "A\nonly", "B\nonly", "p", "p\nHolm", "diff\n(pts)", level.replace(" ", "\n"),
                                 "p\nbal", "p bal\nHolm")):
            # as wide as its widest value (the interval: its wider end), so no number is cut
            widest = max(max(map(len, r[k].split(" to "))) for r in rows)
            table.add_column(col, justify="left" if k == 0 else "right", no_wrap=k == 0, min_width=widest)
        for r in rows:
            table.add_row(*r)
        console.print(table)
    from domainbench.metrics.comparison import FIXED_METHOD

    test = "exact McNemar test" if comparison.method == FIXED_METHOD else "anytime-valid betting test (adaptive run)"
    console.print(f"A only / B only: images only that model gets right (top-1); p: {test} of top-1; p Holm: adjusted over "
                  "all cells and pairs; diff: balanced accuracy A − B with the interval of the verdict's test; p bal: "
                  "the verdict's test of that difference (p bal Holm: adjusted over all cells and pairs; the verdict "
                  "counts a cell when it is below 1 − confidence); see docs/reading-the-numbers.md", style="dim")


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    format: Annotated[str, typer.Option("--format", "-f", help="csv (one row per model × cell) or json (everything).")] = "csv",
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="File to write (default: stdout).")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline for mCE/rCE/mFR.")] = None,
    confidence: Annotated[float, typer.Option(help=CONFIDENCE_HELP)] = 0.95,
    predictions: Annotated[bool, typer.Option("--predictions", help="One row per model × cell × image (label, prediction, correct, confidence) instead of the results.")] = False,
    hard: Annotated[bool, typer.Option("--hard", help="Write the images most models get wrong under the corruptions to the folder -o: hard.csv (why) and files.txt (the clean files), for labelling or fine-tuning.")] = False,
    hard_threshold: Annotated[float, typer.Option("--hard-threshold", help="With --hard: an image is hard when at least this share of model × corrupted cell pairs get it wrong.")] = 0.5,
) -> None:
    """Export a run's results with their intervals as CSV or JSON (JSON adds the model pairs' tests)."""
    from domainbench import query
    from domainbench.stats.intervals import check_confidence

    if hard:
        export_hard(run_id, output, hard_threshold)
        return

    if format not in ("csv", "json"):
        raise UserInputError(f"--format {format!r} is not supported; use csv or json")
    check_confidence(confidence)
    if output:
        from domainbench.runtime.safe_output import output_file

        output_file(output)
    store = _store()
    task_run = _task_run(store, run_id, confidence)
    if task_run is not None:
        _export_task(task_run, format, output, predictions)
        return
    clip_run = _clip_run(store, run_id, confidence)
    if clip_run is not None:
        from domainbench.engine.clip_output import export_text as clip_text, predictions_text as clip_predictions

        text, n = clip_predictions(clip_run, format) if predictions else (clip_text(clip_run, format), len(clip_run.rows))
        _emit(text, output, n)
        return
    if predictions:
        from domainbench.query.predictions import write_predictions

        n = write_predictions(store, run_id, format, output)
        if output:
            _say(f"wrote {n} rows to {output}")
        return
    report = query.report(store, run_id, baseline)
    text = (query.export_json(query.get_run(store, run_id), report, store, confidence) if format == "json"
            else query.export_csv(report, store, confidence))
    _emit(text, output)


def _export_task(result: Any, format: str, output: Optional[Path], predictions: bool) -> None:
    from domainbench.query.task_output import export_text, predictions_text

    text, n = predictions_text(result, format) if predictions else (export_text(result, format), len(result.rows))
    _emit(text, output, n)


def _emit(text: str, output: Optional[Path], rows: Optional[int] = None) -> None:
    """An export's text: into ``output`` atomically (saying so, with its row count where known), else to stdout."""
    if not output:
        sys.stdout.write(text)
        return
    from domainbench.runtime.safe_output import write_atomically

    write_atomically(output, text)
    _say(f"wrote {markup_safe(output)}" if rows is None else f"wrote {rows} rows to {markup_safe(output)}")


def export_hard(run_id: str, output: Optional[Path], threshold: float) -> None:
    """``export --hard``: the hard images' CSV and file list into the folder ``output``."""
    from domainbench.query.hard import hard_csv, hard_images
    from domainbench.runtime.safe_output import output_dir, output_file, write_atomically

    if output is None:
        raise UserInputError("export --hard writes a folder: give it with -o, e.g. -o hard/")
    found = hard_images(_store(), run_id, threshold)  # bad input is refused before the folder is made
    folder = output_dir(output)
    for name in ("hard.csv", "files.txt"):
        output_file(folder / name)
    write_atomically(folder / "hard.csv", hard_csv(found))
    write_atomically(folder / "files.txt", "".join(f"{f}\n" for f in found.files))
    copies = write_hard_copies(_store(), run_id, found, folder)
    classes = write_class_breaks(_store(), run_id, folder)
    clusters = write_failure_clusters(_store(), run_id, found, folder)
    _say(f"wrote {len(found.rows)} hard images of {found.n_images} (at least {100 * threshold:g} % of model × corrupted "
         f"cell pairs wrong) to {markup_safe(folder)}: hard.csv, files.txt, and {copies} corrupted copies (their worst "
         "cells, the pixels the models saw) in corrupted/ (corrupted.csv)"
         + ("; where each class breaks: classes.csv" if classes else "")
         + (f"; the hard images in {clusters} clusters by their clean embeddings: clusters.csv" if clusters else ""))


def write_failure_clusters(store: Any, run_id: str, found: Any, folder: Path) -> int:
    """``clusters.csv`` (image, cluster, model, silhouette): the hard images clustered by the clean embeddings of the
    run's baseline (or its first model with embeddings; ``metrics.class_breaks.failure_clusters``). Returns the number
    of clusters; 0 (nothing written) without hard images or a model with embeddings."""
    import csv
    import io

    from domainbench import query
    from domainbench.engine.scoring import encode, load_model
    from domainbench.metrics.class_breaks import failure_clusters
    from domainbench.models.generative import is_generative
    from domainbench.runtime.safe_output import write_atomically

    if not found.rows:
        return 0
    run = query.get_run(store, run_id)
    report = query.report(store, run_id)
    classes = list(run.dataset.classes) if run.dataset is not None else []
    images, kept = query.recreate_images(run, "clean", 0, sorted(int(r["image"]) for r in found.rows))
    for name in dict.fromkeys([report.baseline, *report.model_names]):
        ms = load_model(name, classes, "cpu", run.config.batch_size, run.config.templates,
                        run.config.model_args.get(name))
        if is_generative(ms.model) or getattr(ms.model, "kind", None) == "classifier":
            continue  # no image embedding of its own (or a remote one)
        emb = encode(ms, images).cpu().numpy()
        break
    else:
        return 0
    labels, score = failure_clusters(emb, run.config.seed)
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(["image", "cluster", "model", "silhouette"])
    for idx, label in sorted(zip((int(i) for i in kept), (int(c) for c in labels), strict=True), key=lambda t: (t[1], t[0])):
        out.writerow([idx, label, name, "" if score is None else repr(score)])
    write_atomically(folder / "clusters.csv", buf.getvalue())
    return int(labels.max()) + 1 if len(labels) else 0


def write_class_breaks(store: Any, run_id: str, folder: Path) -> bool:
    """``classes.csv``: per model × corruption × class its accuracy (recall) per severity, its threshold and the
    severity where it breaks (``metrics.class_breaks``), the classes that break first first. False (nothing written)
    for an unlabelled run."""
    import csv
    import io

    from domainbench import query
    from domainbench.metrics.class_breaks import breaks_first, class_cells
    from domainbench.runtime.safe_output import write_atomically

    run = query.get_run(store, run_id)
    classes = list(run.dataset.classes) if run.dataset is not None else []
    cells = class_cells(query.report(store, run_id), classes) if classes else []
    if not cells:
        return False
    order = {r.label: k for k, r in enumerate(breaks_first(cells))}
    severities = sorted({s for c in cells for s in c.recall})
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(["breaks_first_rank", "class", "model", "corruption", "clean", "threshold",
                  *(f"severity_{s}" for s in severities), "breaks_at"])
    for c in sorted(cells, key=lambda c: (order.get(c.label, len(order)), c.model, c.corruption)):
        out.writerow([order.get(c.label, len(order)) + 1, c.label, c.model, c.corruption,
                      "" if c.clean is None else repr(c.clean), "" if c.threshold is None else repr(c.threshold),
                      *("" if c.recall.get(s) is None else repr(c.recall[s]) for s in severities),
                      "" if c.breaks_at is None else c.breaks_at])
    write_atomically(folder / "classes.csv", buf.getvalue())
    return True


def write_hard_copies(store: Any, run_id: str, found: Any, folder: Path) -> int:
    """Each hard image as each of its worst cells made it, ``corrupted/CELL/IMAGE.png``, and ``corrupted.csv`` (image,
    corruption, severity, file). The images are remade per cell by ``query.recreate`` (the engine's job and the run's
    seed), so they are the pixels the models saw. Returns how many were written."""
    import csv
    import io

    import numpy as np
    from PIL import Image

    from domainbench import query
    from domainbench.runtime.safe_output import write_atomically

    run = query.get_run(store, run_id)
    wanted: dict[tuple[str, int], list[int]] = {}
    for row, cells in zip(found.rows, found.cells, strict=True):
        for cell in cells:
            wanted.setdefault(cell, []).append(int(row["image"]))
    listing = io.StringIO()
    out = csv.writer(listing)
    out.writerow(["image", "corruption", "severity", "file"])
    written = []
    for (corruption, severity), indices in sorted(wanted.items()):
        made, kept = query.recreate(run, corruption, severity, sorted(indices))
        # a composition's name may hold characters a file name should not
        sub = folder / "corrupted" / f"{re.sub(r'[^A-Za-z0-9_.+-]', '_', corruption)}@{severity}"
        for image, idx in zip(made.images, kept, strict=True):
            name = sub / f"{int(idx)}.png"
            buf = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG")
            write_atomically(name, buf.getvalue())
            written.append((int(idx), corruption, severity, name.relative_to(folder).as_posix()))
    for row in sorted(written):
        out.writerow(row)
    write_atomically(folder / "corrupted.csv", listing.getvalue())
    return len(written)


@app.command()
def compare(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN [RUN2 ...]", help="Runs on the same images (same dataset, indices and seed).")],
    models: Annotated[Optional[list[str]], typer.Option("--models", "-m", help="Models to compare, comma-separated (default: all).")] = None,
    confidence: Annotated[float, typer.Option(help=CONFIDENCE_HELP)] = 0.95,
    format: Annotated[str, typer.Option("--format", "-f", help="text (verdicts and a table) or json (pairs and verdicts).")] = "text",
) -> None:
    """Which model is better on these images? One rule: balanced accuracy's paired test, Holm over pairs and cells, a verdict."""
    import json

    from domainbench import query
    from domainbench.stats.intervals import check_confidence

    if format not in ("text", "json"):
        raise UserInputError(f"--format {format!r} is not supported; use text or json")
    check_confidence(confidence)
    comparison = query.comparison(_store(), run_ids, _csv(models), confidence)
    if format == "json":
        sys.stdout.write(json.dumps(comparison.model_dump(mode="json"), indent=2) + "\n")
        return
    if comparison.differing_cells:
        console.print(literal(f"not paired across the runs (each run made them differently: parameters, ladder, steps or "
                              f"shift folder): {', '.join(comparison.differing_cells)}"), highlight=False)
    print_verdicts(comparison)
    print_groups(comparison)
    print_pairs(comparison)


@app.command("report")
def report_cmd(
    run_ids: Annotated[list[str], typer.Argument(metavar="RUN [RUN ...]", help="Runs to report (several: also their joint verdict when they are on the same images).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write (report.html, or report.md with --format md).")],
    format: Annotated[str, typer.Option("--format", "-f", help="html (self-contained: figures and thumbnails embedded, opens offline) or md (for a pull request: tables and sentences).")] = "html",
    confidence: Annotated[float, typer.Option(help=CONFIDENCE_HELP)] = 0.95,
) -> None:
    """Write one file to hand on: the domain and plan, verdict and tied groups, results with intervals, the most confident flips, caveats, data fingerprint and versions."""
    from domainbench.runtime.safe_output import output_file, write_atomically
    from domainbench.stats.intervals import check_confidence

    if format not in ("html", "md"):
        raise UserInputError(f"--format {format!r} is not supported; use html or md")
    check_confidence(confidence)
    output_file(output)
    from domainbench.frontend.handout import write_report

    text = write_report(_store(), run_ids, format, confidence)
    write_atomically(output, text)
    _say(f"wrote {markup_safe(output)}")


@app.command()
def check(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    require: Annotated[Optional[list[str]], typer.Option("--require", "-r", help="A requirement '[model=MODEL] METRIC[@CORRUPTION[:SEVERITY]] OP NUMBER', e.g. 'mce <= 1.0', 'label_flip_probability@motion_blur:3 <= 0.10', 'model=embedded:fmnist-plain clean_accuracy >= 0.7' (OP: <=, >=, <, >; fractions from 0 to 1). Repeat it for several.")] = None,
    against: Annotated[Optional[str], typer.Option("--against", help="A baseline run of the same plan and images: fail when a model's balanced accuracy under corruption is significantly lower (paired test, Holm over the models).")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="Check only these models of the run (comma-separated; default: every model). model= in a requirement scopes that one.")] = None,
    confident: Annotated[bool, typer.Option("--confident", help="Check each requirement on its interval's end that is worse for it (the lower end for >=), not the point estimate.")] = False,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline model for mCE/rCE/mFR.")] = None,
    confidence: Annotated[float, typer.Option(help=CONFIDENCE_HELP)] = 0.95,
) -> None:
    """A gate for CI: exit 0 when every requirement holds (and nothing regressed --against a baseline run), 1 when one fails, 2 on bad input."""
    from domainbench import query

    result = query.check(_store(), run_id, require or [], against=against, models=_csv(model), confident=confident,
                         confidence=confidence, baseline=baseline)
    print_check(result)
    if not result.passed:
        raise typer.Exit(1)


def print_check(result: Any) -> None:
    """The requirements, model by model (what was compared, the threshold, by how much it holds or misses), and
    the regression against the baseline run; then one line with the verdict."""
    level = f"{100 * result.confidence:g} %"
    if result.outcomes:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        interval = f"{level} interval"
        shown = ("", "requirement", "model", "value", *((interval,) if result.confident else ()), "compared", "margin")
        for col in shown:
            table.add_column(col, justify="right" if col in ("value", interval, "compared", "margin") else "left",
                             overflow="fold")
        for o in result.outcomes:
            req = o.requirement
            pct = req.metric.percent or req.metric.unit == "fraction"
            scale, unit = (100, " pts") if pct else (1, "")
            margin = "" if o.margin is None else f"{scale * o.margin:+.{1 if pct else 3}f}{unit}"
            iv = "" if o.interval is None else f"{o.interval[0]:.3f}–{o.interval[1]:.3f}"
            table.add_row("[green]PASS[/green]" if o.holds else "[red]FAIL[/red]",
                          literal(f"{req.target} {req.op} {req.threshold:g}"), literal(o.model),
                          "n/a" if o.value is None else f"{o.value:.3f}", *((iv,) if result.confident else ()),
                          literal(o.note) if o.compared is None else f"{o.compared:.3f}", margin)
        console.print(table)
        what = (f"the worse end of each number's {level} interval" if result.confident else "the point estimates")
        console.print(f"compared: {what}; margin: how far it lies on the right side of the threshold (negative: by how "
                      "much it misses; points for fractions)", style="dim", highlight=False)
    reg = result.regression
    if reg is not None:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        for col in ("", "model", "baseline", "now %", "before %", "diff (pts)", f"{level} CI", "p Holm", "cells worse"):
            table.add_column(col, justify="left" if col in ("", "model", "baseline") else "right", overflow="fold")
        for m in reg.models:
            table.add_row("[red]REGRESSED[/red]" if m.regressed else "[green]OK[/green]", literal(m.model),
                          literal(m.baseline_model if m.baseline_model != m.model else "same"),
                          f"{100 * m.accuracy:.1f}", f"{100 * m.baseline_accuracy:.1f}", f"{100 * m.difference:+.1f}",
                          f"{100 * m.ci_low:+.1f} to {100 * m.ci_high:+.1f}", f"{m.p_holm:.3g}",
                          f"{m.worse_cells} of {m.cells}")
        console.print(table)
        console.print(literal(f"against run {reg.baseline_run_id}: balanced accuracy averaged over the corrupted cells, "
                              "new minus baseline on the same images; regressed: lower with the paired sign-flip test's "
                              f"p Holm-adjusted over the models below {1 - reg.confidence:.3g}"), style="dim",
                      highlight=False)
    failed = len(result.failed) + (len(reg.regressed) if reg is not None else 0)
    checked = len(result.outcomes) + (len(reg.models) if reg is not None else 0)
    if failed:
        console.print(f"[red bold]FAIL[/red bold]: {failed} of {checked} checks failed", highlight=False)
    else:
        console.print(f"[green bold]PASS[/green bold]: all {checked} checks hold", highlight=False)


@app.command()
def fmr(
    config: Annotated[Optional[Path], typer.Argument(help="Domain config TOML: its corruptions are the perturbation family.")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--models", "-m", help="Tested models: registry names, torchvision:CONFIG.json or py:MODULE:ATTR.")] = None,
    oracle: Annotated[Optional[list[str]], typer.Option("--oracle", help="At least two zero-shot registry models voting on the label.")] = None,
    budget: Annotated[int, typer.Option(help="Perturbation steps per image at most.")] = 10,
    candidates: Annotated[int, typer.Option(help="Candidate perturbations per step (greedy search).")] = 4,
    step_size: Annotated[float, typer.Option("--step-size", help="One step's change of a parameter, as a fraction of its range.")] = 0.2,
    search: Annotated[str, typer.Option(help="greedy (the domain's corruptions) or gradient (differentiable brightness, contrast, blur, noise, colour).")] = "greedy",
    limit: Annotated[Optional[int], typer.Option(help="Use N images taken class by class in turn (each class's 1st image, then each class's 2nd, ...).")] = None,
    dataset: Annotated[Optional[str], typer.Option(help="`sample`, a folder of class folders or a CSV manifest (labels needed).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of every random choice of the search.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Images per forward pass.")] = None,
    shard_size: Annotated[Optional[int], typer.Option("--shard-size", help="Images per stored unit (default: as many as keep a unit under 8 MB, at most 50).")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda | cuda:N")] = None,
    workers: Annotated[Optional[int], typer.Option(help="Worker processes that decode images, as for `run` (default: one per core, at most 8; models on a CPU: two cores fewer; 0 = in this process).")] = None,
    resume: Annotated[Optional[str], typer.Option(help="Continue FMR run RUN: stored units are not recomputed.")] = None,
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Id for the new run.")] = None,
    executor: Annotated[Optional[str], typer.Option(help="local (this process) or ray (one actor call per tested model and shard); default $DOMAINBENCH_EXECUTOR or local.")] = None,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster: auto, HOST:6379 or ray://HOST:10001 (default: $DOMAINBENCH_RAY_ADDRESS, else a new local Ray instance).")] = None,
    actors: Annotated[Optional[int], typer.Option(help="Ray actors per tested-model group, each with the oracle.")] = None,
    gpus_per_actor: Annotated[Optional[float], typer.Option(help="GPUs per Ray actor (default: 1 when the cluster has GPUs).")] = None,
    models_per_actor: Annotated[Optional[int], typer.Option(help="Tested models one Ray actor holds (default: all).")] = None,
    model_arg: Annotated[Optional[list[str]], typer.Option("--model-arg", metavar="NAME:KEY=VALUE", help="An option of one tested or oracle model, checked against its backend's options (repeatable), e.g. hf-vlm:llava-hf/llava-1.5-7b-hf:score=mean.")] = None,
) -> None:
    """Foundation-model-oriented robustness: oracle-checked hardest perturbations, SA, PA, FMR = PA/SA × 100."""
    from domainbench import api, query
    from domainbench.records.config import FmrSettings, RunConfig, load_domain
    from domainbench.engine.lifecycle import stored_run
    from domainbench.fmr.oracle import check_oracle_names

    settings_env = _settings()
    exec_options = _executor_options(executor or settings_env.executor, address or settings_env.ray_address, actors,
                                     gpus_per_actor, 1.0, None, models_per_actor)
    if resume and model_arg:
        raise UserInputError(f"--resume {literal(resume)} continues the run with its stored models and their options; "
                             "leave out --model-arg (or start a new run with them)")
    if not resume:
        if config is None:
            raise UserInputError("fmr needs a domain config TOML (its corruptions perturb the images) or --resume RUN")
        oracle_names = _csv(oracle) or []
        check_oracle_names(oracle_names)
        if search not in ("greedy", "gradient"):
            raise UserInputError(f"--search {search!r}: use greedy or gradient")
        notes: list[str] = []
        domain = load_domain(config, notes=notes)
        for note in notes:
            _say(markup_safe(note))
        cfg = RunConfig.from_sources(None, {
            "models": _csv(models), "dataset": dataset, "limit": limit, "seed": seed, "batch_size": batch_size,
            "device": device, "workers": workers, "stability": False, "threat": False, "model_args": _model_args(model_arg),
        })
        if model_arg:
            from domainbench.service.launch import check_model_args

            check_model_args(cfg.model_args, [*cfg.models, *oracle_names])
        try:
            settings = FmrSettings(oracle=oracle_names, search=search, budget=budget, candidates=candidates,  # type: ignore[arg-type]
                                   step_size=step_size, shard_size=shard_size)
        except ValueError as e:
            from pydantic import ValidationError

            from domainbench.errors import first_validation_error

            if isinstance(e, ValidationError):
                loc, msg = first_validation_error(e)
                raise UserInputError(f"--{loc.replace('_', '-')}: {msg}") from None
            raise
    store = _store()
    progress = _progress()

    def search(engine: Any) -> str:
        if resume:
            if stored_run(store, resume).fmr is None:
                raise UserInputError(f"run {resume} is not an FMR run; resume it with `domainbench run --resume {resume}`")
            return engine.resume(resume)
        return engine.start(domain, cfg, run_id=run_id, fmr=settings)

    t0 = time.perf_counter()
    with progress or contextlib.nullcontext():
        # the Python API's one run-start path (as `run`'s), the FMR kind chosen by its settings
        done = api.run_plan(store, search, executor=exec_options, events=RichEvents(progress))
    assert done.stats is not None
    _say(f"run {markup_safe(done.id)}: {done.stats.computed_units} FMR units computed, {done.stats.skipped_units} already "
         f"stored, {time.perf_counter() - t0:.1f} s")
    print_report(query.report(store, done.id))


@app.command()
def gallery(
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for the contact sheets.")],
    image: Annotated[Optional[Path], typer.Option(help="Image file (default: an image of the bundled sample).")] = None,
    corruptions_: Annotated[Optional[list[str]], typer.Option("--corruptions", "-c", help="Corruption names (default: all).")] = None,
    seed: int = 0,
    corruptions_module: Annotated[Optional[list[str]], typer.Option("--corruptions-module")] = None,
) -> None:
    """Write a contact sheet per corruption × severity of one image."""
    import numpy as np

    from domainbench.corruptions.gallery import write_gallery

    _load_plugins(corruptions_module)
    if image is not None:
        from PIL import Image

        from domainbench.corruptions.api import MIN_SIDE

        if image.exists() and not image.is_file():
            raise UserInputError(f"--image {image} is {'a folder' if image.is_dir() else 'not a regular file'}; "
                                 "give an image file")
        if not image.is_file():
            raise UserInputError(f"--image {image} does not exist; give an image file")
        try:
            img = np.asarray(Image.open(image).convert("RGB"))
        except Exception as e:
            raise UserInputError(f"--image {image} cannot be read as an image ({e})") from e
        if min(img.shape[:2]) < MIN_SIDE:  # refused before -o's folder is made
            raise UserInputError(f"--image {image} is {img.shape[1]}x{img.shape[0]}; corruptions need at least "
                                 f"{MIN_SIDE}x{MIN_SIDE} pixels: give a larger image")
    else:
        from domainbench.data import load_sample

        import cv2

        img = cv2.resize(load_sample().arrays[0], (112, 112), interpolation=cv2.INTER_NEAREST)  # type: ignore[index]
    from domainbench.corruptions import get, names
    from domainbench.runtime.safe_output import output_dir, output_file, write_atomically

    chosen = [get(n).name for n in _csv(corruptions_) or names(temporal=False)]  # unknown names fail before writing
    folder = output_dir(output)
    for name in chosen:  # a FIFO or folder among the sheets' names is refused before any sheet is written
        output_file(folder / f"{name}.png")
    paths = write_gallery(img, output, names=chosen, seed=seed, write=write_atomically)
    _say(f"wrote {len(paths)} contact sheets to {markup_safe(output)}")


@app.command("models")
def list_models_cmd(
    pattern: Annotated[str, typer.Argument(help="Shell wildcard, e.g. 'open_clip:ViT-L*' (with --backends: on the prefix).")] = "*",
    backends: Annotated[bool, typer.Option("--backends", help="List the backends instead: what each can do and the options it takes (--model-arg NAME:KEY=VALUE).")] = False,
) -> None:
    """List known model names (any open_clip or HF name also works with its prefix)."""
    if backends:
        print_backends(pattern)
        return
    from domainbench.models import list_models

    for name in list_models(pattern):
        console.print(printable(name), highlight=False, markup=False)


def print_backends(pattern: str = "*") -> None:
    """One row per model backend: its capabilities and its per-model options with their defaults."""
    from domainbench.records.model_backends import MODEL_BACKENDS

    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for col in ("prefix", "kind", "remote", "differentiable", "embeddings", "devices", "any name", "options (default)"):
        table.add_column(col, no_wrap=col != "options (default)")
    yes = {True: "yes", False: "no"}
    for prefix in MODEL_BACKENDS.names(pattern):
        backend = MODEL_BACKENDS.get(prefix)
        c = backend.capabilities
        options = ", ".join(f"{k} ({f.default})" for k, f in backend.options.model_fields.items()) or "none"
        table.add_row(literal(prefix), c.kind, yes[c.remote], yes[c.differentiable], yes[c.image_embeddings],
                      ", ".join(c.devices), yes[c.open_ended], literal(options))
    console.print(table)


@app.command("metrics")
def list_metrics_cmd(
    pattern: Annotated[str, typer.Argument(help="Shell wildcard on the name or display name, e.g. '*accuracy*'.")] = "*",
    format: Annotated[str, typer.Option("--format", "-f", help="table or json (every declared field).")] = "table",
) -> None:
    """List the metrics domainbench reports: name, unit, which direction is better, what it means (the UI's glossary)."""
    import json

    from domainbench.metrics.registry import registry

    if format not in ("table", "json"):
        raise UserInputError(f"--format {format!r} is not supported; use table or json")
    found = registry().find(pattern)
    if not found:
        raise UserInputError(f"no metric matches {pattern!r}; `domainbench metrics` lists them all")
    if format == "json":
        sys.stdout.write(json.dumps([m.describe() for m in found], indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for col in ("name", "level", "unit", "better", "meaning"):
        table.add_column(col, no_wrap=col != "meaning")
    for m in found:
        # the paragraph the UI's hovers and glossary show (meaning, unit, which direction is better)
        table.add_row(m.name, m.level, m.unit, m.direction or "-", literal(m.help))
    console.print(table)


@app.command()
def ui(
    port: Annotated[int, typer.Option(help="Port for the Streamlit server.")] = 8501,
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 exposes the UI to the network.")] = "127.0.0.1",
    worker: Annotated[bool, typer.Option("--worker/--no-worker", help="Start a worker beside the UI (embedded store only).")] = True,
) -> None:
    """Open the browser UI (Streamlit); with the embedded store, a worker runs what it launches."""
    from domainbench import frontend

    # the package's own folder: in the wheel beside this one, in an editable install the checkout's frontend/
    app_path = Path(frontend.__file__).resolve().parent / "app.py"
    from domainbench.runtime.parent_watch import command as watched

    # both children end when this process dies, even by kill -9 (no orphaned server or worker)
    command = watched("streamlit", "run", str(app_path), "--server.port", str(port),
                      "--server.address", host, "--server.headless", "true", "--browser.gatherUsageStats", "false",
                      "--client.toolbarMode", "viewer")
    # with MongoDB the workers are separate machines (`domainbench worker`); the embedded store
    # lives on this one, so the UI brings the worker that runs what its New domain page queues
    side = None
    if worker and not _settings().store_uri:
        side = subprocess.Popen(watched("domainbench.app.cli", "--quiet", "worker"), stdin=subprocess.DEVNULL)
        _say(f"worker started (process {side.pid}); it runs the runs launched from the UI")
    _say(f"starting the UI on http://{'localhost' if host == '127.0.0.1' else host}:{port} (Ctrl-C stops it)")
    try:
        # the pages tell whether the built-in worker is alive (frontend/progress.py)
        env = {**os.environ, **({"DOMAINBENCH_UI_WORKER_PID": str(side.pid)} if side is not None else {})}
        code = subprocess.call(command, env=env)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM reach Streamlit too; it stops by itself
        code = 0
    finally:
        if side is not None and side.poll() is None:
            side.terminate()  # the worker hands its run back to the queue on SIGTERM
            try:
                side.wait(timeout=30)
            except subprocess.TimeoutExpired:
                side.kill()
    raise typer.Exit(code)


@app.command("worker")
def worker_cmd(
    lease: Annotated[float, typer.Option(help="Seconds a claim holds without renewal; a dead worker's run is resumed after it.")] = 60.0,
    poll: Annotated[float, typer.Option(help="Seconds between looks at an empty queue.")] = 2.0,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Exit when no run is queued or held by another live worker.")] = False,
    max_runs: Annotated[Optional[int], typer.Option(help="Exit after taking this many runs.")] = None,
    name: Annotated[Optional[str], typer.Option(help="Worker name stored on the runs it takes (default: host:pid:random).")] = None,
) -> None:
    """Run queued runs from the store (launched from the UI), resuming runs whose worker died."""
    from domainbench.app.worker import Worker

    for flag, value, most in (("--lease", lease, 86400.0), ("--poll", poll, 3600.0)):
        if not 0 < value <= most:  # nan fails both comparisons
            raise UserInputError(f"{flag} {value:g}: give seconds above 0 and at most {most:g}")

    # a long-running worker takes its executor from the environment (the compose file sets it)
    w = Worker(_store(), name=name, lease_s=lease, poll_s=poll, say=_say_always, executor=_settings().executor_options())
    try:
        n = w.serve(until_idle=until_idle, max_runs=max_runs)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: a run in progress went back to the queue
        _say_always(f"worker {w.name} stopped after taking {len(w.executed)} run(s)")
        raise typer.Exit(0) from None
    _say(f"worker {markup_safe(w.name)}: {n} run(s) taken")


def _say_always(text: str) -> None:
    # a worker's log is its only output: it prints even with --quiet, without markup
    err_console.print(printable(cfg.domain if text is None else text), highlight=False, markup=False)


@app.command()
def demo(
    limit: Annotated[Optional[int], typer.Option(help="Images of the bundled sample to use (default: all 1,000).")] = None,
    task: Annotated[str, typer.Option("--task", help="classification (default), vqa or retrieval: write task manifests from the bundled sample and evaluate the embedded models on them.")] = "classification",
) -> None:
    """Plan a demo domain offline and evaluate both embedded models on the bundled sample."""
    from domainbench import api, query
    from domainbench.records.config import save

    if task != "classification":
        _demo_task(task, limit)
        return
    run_cfg = api.build_run_config(None, limit=limit)
    store = _store()  # first: a bad DOMAINBENCH_HOME is reported before anything is written there
    _say(f"domain: {DEMO_DOMAIN}")
    cfg = api.plan(DEMO_DOMAIN, provider="offline")
    path = save(cfg, _settings().home / "demo-domain.toml")
    _say(f"planned {len(cfg.corruptions)} corruptions ({', '.join(c.name for c in cfg.corruptions)}); config in {markup_safe(path)}")
    progress = _progress()
    with progress or contextlib.nullcontext():
        run_id = api.run(cfg, run_config=run_cfg, store=store, events=RichEvents(progress)).id
    print_report(query.report(store, run_id))
    console.print(f"\nResults are stored in {markup_safe(store.description)}. Browse them with [bold]make ui[/bold] "
                  f"(or `domainbench ui`) and open http://localhost:8501 ; `domainbench show {markup_safe(run_id)}` prints this table again.")


# --------------------------------------------------------------------------- finetune (docs/finetune.md)


def _number(flag: str, text: Optional[str]) -> Optional[float]:
    """A number option read as text, so a typo is one `error:` line (click's usage error is several)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise UserInputError(f"{flag} {text!r} is not a number; give e.g. {flag} 1") from None


@app.command()
def finetune(
    model: Annotated[Optional[str], typer.Argument(help="The base model, e.g. embedded:fmnist-plain.")] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Domain config TOML: the corruptions to train against.")] = None,
    dataset: Annotated[Optional[str], typer.Option("--dataset", help="Images (labels are never read): sample, a folder or a CSV manifest.")] = None,
    out: Annotated[Optional[Path], typer.Option("-o", "--out", help="Output folder: a local: model (evaluate with --models local:OUT).")] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Epochs over the training images (default 5).")] = None,
    lr: Annotated[Optional[str], typer.Option("--lr", help="Adam learning rate (default 1e-4).")] = None,
    lam: Annotated[Optional[str], typer.Option("--lambda", help="λ, weight of staying close to the base (L2); default 1. Several (0,1,5): one model each, one trade-off table.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Images per step (default 32).")] = None,
    train_split: Annotated[Optional[str], typer.Option(help="Share of the files trained on, in (0, 1); the rest is held out (default 0.8).")] = None,
    trainable: Annotated[Optional[str], typer.Option(help="all, lora, or last-N: only the last N layers with weights train.")] = None,
    lora: Annotated[bool, typer.Option("--lora", help="Train LoRA adapters only (peft); the same as --trainable lora.")] = False,
    lora_rank: Annotated[Optional[int], typer.Option(help="LoRA rank (default 8).")] = None,
    lora_alpha: Annotated[Optional[str], typer.Option(help="LoRA alpha (default 16).")] = None,
    lora_targets: Annotated[Optional[str], typer.Option(help="LoRA target layers: linear (every nn.Linear, default) or comma-separated module names.")] = None,
    precision: Annotated[Optional[str], typer.Option(help="fp32 (default), bf16 (CPU or CUDA) or fp16 (CUDA): the forward passes' autocast.")] = None,
    grad_accum: Annotated[Optional[int], typer.Option(help="Split each step's --batch-size into K micro-batches (same step, less memory).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the split, the order and the corruptions drawn (default 0).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda or cuda:N (default cpu).")] = None,
    image_size: Annotated[Optional[int], typer.Option(help="File images are resized and centre-cropped to this size (default 224).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace OUT when it is an earlier fine-tune's folder.")] = False,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue the fine-tune in this folder from its last checkpoint.")] = None,
    evaluate: Annotated[bool, typer.Option("--evaluate/--no-evaluate", help="After training, evaluate base and fine-tuned model on the held-out images.")] = True,
) -> None:
    """Fine-tune a model's image tower so corrupted images embed like clean ones (stability paper §6.1)."""
    from domainbench import api

    progress = None if STATE.quiet else Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                                 TextColumn("steps"), TimeElapsedColumn(), TimeRemainingColumn(), console=err_console)
    task: list[Any] = []
    sweep: list[float] | None = None
    if lam is not None and "," in lam and resume is None:
        from domainbench.tuning.sweep import parse_lambdas

        sweep = parse_lambdas(lam)

    def on_step(epoch: int, step: int, steps: int, l1: float, l2: float) -> None:
        if progress is None:
            return
        if not task:
            task.append(progress.add_task("fine-tuning", total=None))
        progress.update(task[0], total=steps, completed=step, description=f"epoch {epoch}  L1 {l1:+.4f}  L2 {l2:+.4f}")

    try:
        with progress or contextlib.nullcontext():
            if resume is not None:
                if model or plan or dataset or out:
                    raise UserInputError("--resume OUT continues a fine-tune as it was set up: give it alone (with --epochs to train longer)")
                result = api.finetune_resume(resume, epochs=epochs, on_step=on_step)
            else:
                if not (model and plan and dataset and out):
                    raise UserInputError("finetune needs MODEL --plan plan.toml --dataset DIR -o OUT (or --resume OUT)")
                if lora and trainable not in (None, "lora"):
                    raise UserInputError(f"--lora and --trainable {trainable} disagree: give one of them")
                options = dict(epochs=epochs, lr=_number("--lr", lr), batch_size=batch_size,
                               train_split=_number("--train-split", train_split), trainable="lora" if lora else trainable,
                               seed=seed, device=device, image_size=image_size, precision=precision, grad_accum=grad_accum,
                               lora_rank=lora_rank, lora_alpha=_number("--lora-alpha", lora_alpha), lora_targets=lora_targets)
                if sweep is not None:
                    from domainbench.tuning.sweep import train_sweep

                    results = train_sweep(model, plan, dataset, out, sweep, overwrite=overwrite, on_step=on_step, **options)
                else:
                    result = api.finetune(model, plan, dataset, out, overwrite=overwrite, on_step=on_step,
                                          lam=_number("--lambda", lam), **options)
    except KeyboardInterrupt:
        where = "the λ folder it was training in" if sweep is not None else resume or out
        err_console.print(f"interrupted: the last finished epoch is kept; continue with `domainbench finetune --resume {where}`")
        sys.exit(130)
    if sweep is not None:
        return _finetune_sweep_done(results, evaluate)
    last = result.state.history[-1] if result.state.history else None
    if last is not None:
        _say(f"epoch {last['epoch']:g}: L1 {last['l1']:+.4f}, L2 {last['l2']:+.4f}")
    console.print(f"fine-tuned model in {markup_safe(result.out)}: evaluate it with --models {markup_safe(result.model)}", soft_wrap=True)
    if evaluate:
        store = _store()
        with (eval_progress := _progress()) or contextlib.nullcontext():
            run = api.finetune_evaluate(result.out, store=store, events=RichEvents(eval_progress))
        _print_finetune_evaluation(run, result.state.base, f"local:{result.out.resolve()}")


def _finetune_sweep_done(results: list[Any], evaluate: bool) -> None:
    """After a λ sweep: each model's name, then one held-out run of the base and all of them, as one table."""
    from domainbench import api
    from domainbench.tuning.sweep import tradeoff_rows

    for r in results:
        console.print(f"λ = {r.state.options.lam:g}: evaluate it with --models {markup_safe(r.model)}", soft_wrap=True)
    if not evaluate:
        return
    store = _store()
    with (eval_progress := _progress()) or contextlib.nullcontext():
        run = api.finetune_evaluate(results[0].out, also=[r.out for r in results[1:]], store=store, events=RichEvents(eval_progress))
    rows = tradeoff_rows(run, results[0].state.base, {r.state.options.lam: f"local:{r.out.resolve()}" for r in results})
    corruptions = list(rows[0].radius)
    table = Table(title=f"λ trade-off on the held-out images (run {run.id})", box=box.SIMPLE)
    for col in ("model", "λ", "clean accuracy", "corrupted accuracy", *(f"radius {c}" for c in corruptions)):
        table.add_column(col)
    for row in rows:
        table.add_row(literal(row.model), "base" if row.lam is None else f"{row.lam:g}",
                      *(f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in (row.clean, row.corrupted)),
                      *(f"{row.radius[c]:.3f}" for c in corruptions))
    console.print(table)
    console.print(f"`domainbench show {run.id}` has every cell.", soft_wrap=True, markup=False)


def _print_finetune_evaluation(run: Any, base: str, tuned: str) -> None:
    """Base beside fine-tuned on the held-out images: accuracy clean and corrupted with intervals, DivergenceRadius."""
    summary = run.summary().set_index("model")
    table = Table(title=f"held-out evaluation (run {run.id}, {summary.shape[0]} models)", box=box.SIMPLE)
    for col in ("model", "clean accuracy", "corrupted accuracy", *(f"radius {s.corruption}" for s in run.report.stability
                                                                     if s.model == base)):
        table.add_column(col)
    radius = {(s.model, s.corruption): s.divergence_radius for s in run.report.stability}

    def acc(row: Any, name: str) -> str:
        return f"{row[name]:.3f} [{row[name + '_ci_low']:.3f}, {row[name + '_ci_high']:.3f}]"

    for name in (base, tuned):
        row = summary.loc[name]
        table.add_row(literal(name), acc(row, "clean_accuracy"), acc(row, "mean_corrupted_accuracy"),
                      *(f"{radius[(name, s.corruption)]:.3f}" for s in run.report.stability if s.model == base))
    console.print(table)
    b, t = summary.loc[base], summary.loc[tuned]
    above = t["mean_corrupted_accuracy_ci_low"] > b["mean_corrupted_accuracy"]
    console.print(f"verdict: corrupted accuracy {b['mean_corrupted_accuracy']:.3f} -> {acc(t, 'mean_corrupted_accuracy')} "
                  f"({'its interval lies above the base' if above else 'not clearly above the base'}); clean accuracy "
                  f"{b['clean_accuracy']:.3f} -> {acc(t, 'clean_accuracy')}. `domainbench show {run.id}` has every cell.",
                  soft_wrap=True, markup=False)


def _demo_task(task: str, limit: Optional[int]) -> None:
    """``demo --task vqa|retrieval``: manifests written from the bundled sample, both embedded models evaluated.

    The embedded models are contrastive: they answer the yes/no and multiple-choice questions (by prompt
    similarity), so the VQA demo keeps those; open questions need a generative model (`run --task vqa`)."""
    import json

    from domainbench import api
    from domainbench.data.manifests import load_vqa_manifest
    from domainbench.data.task_samples import write_sample_manifests
    from domainbench.engine.task_kind import TASK_KINDS, load_task_run
    from domainbench.query.task_output import print_task_result

    if task not in TASK_KINDS:
        raise UserInputError(f"--task {task!r}: the demo runs classification, vqa or retrieval; choose one of those")
    if limit is not None and limit < 1:
        raise UserInputError(f"--limit {limit}: give at least 1 image")
    store = _store()  # first: a bad DOMAINBENCH_HOME is reported before anything is written there
    folder = _settings().home / f"demo-{task}"
    vqa, retrieval = write_sample_manifests(folder, images=limit or 20)
    manifest = retrieval
    if task == "vqa":
        m = load_vqa_manifest(vqa)
        open_lines = {m.line_of[i] for i in m.open_questions()}
        manifest = folder / "vqa-closed.jsonl"
        manifest.write_text("".join(line + "\n" for n, line in enumerate(vqa.read_text().splitlines(), start=1)
                                    if n not in open_lines and line.strip()))
        json.loads(manifest.read_text().splitlines()[0])  # the kept rows are the manifest's own JSON lines
    domain = api.plan(DEMO_DOMAIN, provider="offline")
    _say(f"{task} manifest {markup_safe(manifest)}; planned {len(domain.corruptions)} corruptions")
    done = api.run(domain, dataset=manifest, task=task, run_config={"image_size": 28}, store=store)
    print_task_result(console, load_task_run(store, done.id))
    console.print(f"\n`domainbench show {markup_safe(done.id)}` prints this table again; "
                  f"`domainbench export {markup_safe(done.id)} --predictions` lists every answer.")


def _terminate(signum: int, frame: Any) -> None:
    # `docker stop`, `kill` and the like: stop like Ctrl-C, so the run is marked interrupted
    raise KeyboardInterrupt


#: options whose value may be left out (click's optional values do not pass through typer): the value then used
OPTIONAL_VALUES = {"--breaking-point": "auto"}


def _optional_values(args: list[str]) -> list[str]:
    """``args`` with the implied value after an optional-value option given alone (last, or before another option)."""
    out = []
    for i, a in enumerate(args):
        out.append(a)
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in OPTIONAL_VALUES and (nxt is None or (nxt.startswith("-") and not nxt[1:2].isdigit() and nxt[1:2] != ".")):
            out.append(OPTIONAL_VALUES[a])
    return out


def main() -> None:
    import signal

    global _STARTED, _MAIN_CALLS
    if _MAIN_CALLS:  # called again in one process (tests): the imports were paid by the first call
        _STARTED = time.perf_counter()
    _MAIN_CALLS += 1

    from domainbench.runtime import host_memory
    host_memory.configure()  # huge pages for torch, heap reuse for temporaries: before anything imports torch
    signal.signal(signal.SIGTERM, _terminate)
    STATE.quiet, STATE.settings = False, None  # nothing carries over from an earlier call in this process
    try:
        # outside standalone mode typer returns exit codes (130 after Ctrl-C) instead of exiting
        rv = app(args=_optional_values(sys.argv[1:]), standalone_mode=False)
        if rv == 130:
            raise KeyboardInterrupt
        if isinstance(rv, int) and not isinstance(rv, bool):
            sys.exit(rv)
    except (UserInputError, _corruption_error(), _metric_error()) as e:
        err_console.print(f"error: {printable(_settings().redact(str(e)))}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        # the interrupted command decides how to go on: `fmr` runs resume through `fmr --resume`
        subcommand = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        command = "fmr" if subcommand == "fmr" else "run"
        err_console.print(f"interrupted: finished units are stored; continue with `domainbench {command} --resume RUN`")
        sys.exit(130)
    except Exception as e:
        # usage errors (unknown command, bad option value) show themselves and carry an exit
        # code; typer vendors click, so they are recognised by shape, not by class
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if type(e).__name__ == "Abort":
            sys.exit(1)
        from domainbench.runtime.disk_full import disk_full_cause, disk_full_message

        full = disk_full_cause(e)
        if full is not None:
            where = getattr(full, "filename", None) or _settings().home
            err_console.print(f"error: {printable(_settings().redact(disk_full_message(full, str(where))))}",
                              highlight=False, markup=False, soft_wrap=True)
            sys.exit(2)
        damaged = _damaged_store(e)
        if damaged is not None:
            err_console.print(f"error: {printable(_settings().redact(damaged))}", highlight=False, markup=False,
                              soft_wrap=True)
            sys.exit(2)
        _internal_error(e)


def _metric_error() -> type[Exception]:
    """The metric registry's error (a plug-in that fails to load or clashes, a declaration it refuses), as
    :func:`_corruption_error` names the corruption library's: only when the command loaded the registry."""
    registry = sys.modules.get("domainbench.metrics.registry")
    return registry.MetricRegistryError if registry is not None else UserInputError


def _corruption_error() -> type[Exception]:
    """The corruption library's error class, or UserInputError again when the command never loaded it.

    An ``except`` clause's classes are looked up when an exception reaches it: a command that
    never imported ``domainbench.corruptions`` (cv2, albumentations' kernels) cannot have raised its
    error, and read commands such as ``ls`` must not import it just to name the class.
    """
    errors = sys.modules.get("domainbench.corruptions.errors")
    return errors.CorruptionError if errors is not None else UserInputError


def _damaged_store(e: BaseException) -> str | None:
    """The one line for an embedded store whose file is damaged (a torn page), else None."""
    import sqlite3

    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        text = str(cause)
        if isinstance(cause, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
            home = _settings().home
            return (f"a database in {home} is damaged ({text}): the store domainbench.sqlite or the answer cache "
                    "vlm-answers.sqlite; move the file aside (`sqlite3 FILE .recover | sqlite3 NEW` saves what it "
                    "holds) or point DOMAINBENCH_HOME at another folder")
        cause = cause.__cause__ or cause.__context__
    return None


def _internal_error(e: Exception) -> None:
    """A bug, not the user's input: exit 1 with where the traceback went and how to report it."""
    from domainbench.runtime.crash_report import internal_error_message, write_crash_report

    settings = _settings()
    report = write_crash_report(e, settings)
    if report is None:  # nowhere writable: the traceback must not be lost
        import traceback

        err_console.print(settings.redact("".join(traceback.format_exception(e))), highlight=False, markup=False)
    err_console.print(internal_error_message(e, settings, report), highlight=False, markup=False, soft_wrap=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
