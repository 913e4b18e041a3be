"""The real-shift match against hand-worked examples (values worked out in the comments)."""

from __future__ import annotations

import pytest

from domainbench.metrics.shift_match import match_shift, shift_matches
from domainbench.records.results import CellSummary, ModelSummary, RunSummary


def _cell(corruption: str, severity: int, accuracy: float | None, flips: int = 0, n: int = 100) -> CellSummary:
    return CellSummary(corruption=corruption, severity=severity, n=n, n_unreadable=0, flips=flips, lfp=flips / n,
                       accuracy=accuracy, confusion=None, in_common=not corruption.startswith("shift:"))


def _model(name: str, clean: float | None, cells: list[CellSummary]) -> ModelSummary:
    return ModelSummary(model=name, is_baseline=name == "A", labeled=clean is not None, clean_accuracy=clean, clean=None,
                        cells=cells, mean_corrupted_accuracy=None, mce=None, rce=None, mfr=None, pearson_acc_lfp=None,
                        ce_per_corruption={}, rce_per_corruption={}, fr_per_corruption={}, notes=[])


def _summary(models: list[ModelSummary]) -> RunSummary:
    common = sorted({(c.corruption, c.severity) for m in models for c in m.cells if c.in_common})
    return RunSummary(baseline="A", classes=["a", "b"], run_ids=["r"], common_cells=common, dropped_cells={},
                      models=models)


# clean, fog@1, low_light@4, shift:night (balanced accuracies)
THREE = {"A": (0.90, 0.85, 0.70, 0.72), "B": (0.80, 0.70, 0.65, 0.64), "C": (0.70, 0.65, 0.40, 0.45)}


def _three() -> RunSummary:
    return _summary([_model(m, clean, [_cell("fog", 1, fog), _cell("low_light", 4, dark), _cell("shift:night", 1, real)])
                     for m, (clean, fog, dark, real) in THREE.items()])


def test_three_models_hand_worked() -> None:
    match = match_shift(_three(), "shift:night")
    # drops (points): fog A 5 B 10 C 5; low_light A 20 B 15 C 30; the shift A 18 B 16 C 25
    assert match.measure == "accuracy drop"
    # per model |fog - real| = 13, 6, 20 and |low_light - real| = 2, 1, 5: low_light everywhere
    assert [(p.model, p.cell, round(p.synthetic, 9), round(p.real, 9)) for p in match.per_model] == [
        ("A", ("low_light", 4), 20.0, 18.0), ("B", ("low_light", 4), 15.0, 16.0), ("C", ("low_light", 4), 30.0, 25.0)]
    # ranks: real (2, 1, 3); low_light (2, 1, 3): ρ = 1; fog (1.5, 3, 1.5): ρ = -1.5/sqrt(1.5 * 2) = -0.866
    assert match.ranking_cell == ("low_light", 4) and match.ranking_rho == pytest.approx(1.0)
    # the plan's mean drops A 12.5, B 12.5, C 17.5 -> ranks (1.5, 1.5, 3) against (2, 1, 3): ρ = 1.5/sqrt(3)
    assert match.plan_rho == pytest.approx(1.5 / 3 ** 0.5)
    # which cell behaves most like the shift is said per model (query.shift); this sentence is the ranking alone
    assert match.sentence == ("On your `night` images, by accuracy drop: the plan's ranking of models agrees with "
                              "the real shift (ρ = 0.87); `low_light` at severity 4 ranks them most like it (ρ = 1.00).")


def test_the_ranking_disagrees_when_the_plan_orders_models_the_other_way() -> None:
    # low_light drops A 30 B 20 C 10 against real A 10 B 20 C 30: reversed, ρ = -1
    models = [_model(m, 0.9, [_cell("low_light", 4, 0.9 - d / 100), _cell("shift:night", 1, 0.9 - r / 100)])
              for m, d, r in (("A", 30, 10), ("B", 20, 20), ("C", 10, 30))]
    match = match_shift(_summary(models), "shift:night")
    assert match.plan_rho == pytest.approx(-1.0) and match.ranking_rho == pytest.approx(-1.0)
    assert "reverses the real shift (ρ = -1.00)" in match.sentence


def test_an_unlabelled_shift_is_matched_by_flip_rate_and_two_models_are_not_ranked() -> None:
    models = [_model(m, 0.9, [_cell("fog", 1, 0.8, flips=f1), _cell("blur", 2, 0.7, flips=f2),
                              _cell("shift:scan", 1, None, flips=real)])
              for m, f1, f2, real in (("A", 10, 40, 12), ("B", 20, 30, 27))]
    match = match_shift(_summary(models), "shift:scan")
    # flip rates: fog A 10 B 20, blur A 40 B 30, real A 12 B 27; |diff| fog 2, 7 (mean 4.5), blur 28, 3 (mean 15.5)
    assert match.measure == "flip rate"
    assert [(p.model, p.cell) for p in match.per_model] == [("A", ("fog", 1)), ("B", ("blur", 2))]
    assert [(p.model, round(p.synthetic, 9), round(p.real, 9)) for p in match.per_model] == [("A", 10.0, 12.0),
                                                                                           ("B", 30.0, 27.0)]
    assert match.ranking_rho is None and match.plan_rho is None
    assert match.sentence == ""  # two models are not ranked


def test_ties_go_to_the_first_cell_and_other_shifts_and_compositions_are_never_candidates() -> None:
    m = _model("A", 0.9, [_cell("blur", 1, 0.8), _cell("compose:x", 1, 0.7), _cell("fog", 1, 0.6),
                          _cell("shift:day", 1, 0.7), _cell("shift:night", 1, 0.7)])
    matches = {x.shift: x for x in shift_matches(_summary([m]))}
    assert set(matches) == {"shift:day", "shift:night"}
    # drop 20 against blur 10 and fog 30: a tie, the first cell in (corruption, severity) order wins
    assert [p.cell for p in matches["shift:night"].per_model] == [("blur", 1)]


def test_a_run_without_shifts_has_no_match() -> None:
    assert shift_matches(_summary([_model("A", 0.9, [_cell("fog", 1, 0.8)])])) == []
