"""``--lambda 0,1,5``: one fine-tune per λ on the same split, evaluated in one held-out run (the paper's Table 9).

Each λ trains into ``OUT/lambda-<λ>`` (a ``local:`` model folder like any fine-tune); the seed, the
split, the image order and the corruption draws are the same for all, so λ is the only difference.
The trade-off table has one row per model: clean and mean corrupted balanced accuracy with their 95 %
intervals and DivergenceRadius per corruption, the base first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domainbench.errors import UserInputError


def parse_lambdas(text: str) -> list[float]:
    """``"0,1,5"`` -> [0.0, 1.0, 5.0]; one ``UserInputError`` naming the bad part."""
    values: list[float] = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise UserInputError(f"--lambda {text!r}: {part.strip()!r} is not a number; give e.g. --lambda 1 or --lambda 0,1,5") from None
        if not v >= 0 or v == float("inf"):
            raise UserInputError(f"--lambda {text!r}: {v:g} is not a finite number ≥ 0")
        values.append(v)
    if len(set(values)) != len(values):
        raise UserInputError(f"--lambda {text!r}: a value repeats; give each λ once")
    return values


def folder_of(out: Path, lam: float) -> Path:
    return out / f"lambda-{lam:g}"


def train_sweep(model: str, plan: Any, dataset: Any, out: str | Path, lams: list[float], *, overwrite: bool = False,
                on_step: Any = None, **options: Any) -> list[Any]:
    """Fine-tune ``model`` once per λ into ``out/lambda-<λ>``; every input is checked before the first is written."""
    from domainbench.tuning.train import _check_out, _check_plan, check_options, train
    from domainbench.tuning.towers import check_name

    out = Path(out)
    for lam in lams:
        check_options(**{**options, "lam": lam})
    check_name(model)
    _check_plan(plan)
    if out.exists() and not overwrite:
        raise UserInputError(f"-o {str(out)!r} already exists; choose a new folder, or add --overwrite to replace its lambda-* fine-tunes")
    if out.exists() and not out.is_dir():
        raise UserInputError(f"-o {str(out)!r} is a file; a λ sweep writes a folder of fine-tunes: choose a new folder")
    for lam in lams:
        _check_out(folder_of(out, lam), overwrite)
    # each train() checks the dataset before it writes: the first λ's refusal leaves nothing behind
    return [train(model, plan, dataset, folder_of(out, lam), overwrite=overwrite, on_step=on_step, **{**options, "lam": lam})
            for lam in lams]


@dataclass(frozen=True)
class TradeoffRow:
    model: str
    lam: float | None  # None: the base model
    clean: tuple[float, float, float]  # estimate, 95 % interval low, high
    corrupted: tuple[float, float, float]
    radius: dict[str, float]  # DivergenceRadius per corruption


def tradeoff_rows(run: Any, base: str, tuned: dict[float, str]) -> list[TradeoffRow]:
    """The trade-off table's rows, read from the held-out run (base first, then λ ascending)."""
    summary = run.summary().set_index("model")
    radius: dict[str, dict[str, float]] = {}
    for s in run.report.stability:
        radius.setdefault(s.model, {})[s.corruption] = float(s.divergence_radius)

    def triple(row: Any, name: str) -> tuple[float, float, float]:
        return float(row[name]), float(row[name + "_ci_low"]), float(row[name + "_ci_high"])

    rows = []
    for lam, name in [(None, base), *sorted(tuned.items())]:
        r = summary.loc[name]
        rows.append(TradeoffRow(name, lam, triple(r, "clean_accuracy"), triple(r, "mean_corrupted_accuracy"), radius.get(name, {})))
    return rows
