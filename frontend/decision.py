"""Compare's decision view: the tied groups of the chosen runs' models (one paired comparison over all their cells,
``metrics.letters``) and cost beside robustness across the runs (``metrics.cost`` on the runs' pooled timings).

The groups come from ``query.pooled``: the runs' per-image outcomes pooled (so they must be on the same images with
the same seed), each pair of models tested over every corrupted cell of every run, Holm-adjusted, as the verdicts
test one run. Runs that cannot be pooled get no groups, and the page says why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from domainbench import query
from domainbench.metrics.cost import ModelCost, fastest_not_worse, model_costs, pooled_timings
from domainbench.query import Store

log = logging.getLogger("domainbench.ui")


@dataclass
class JointGroups:
    """The chosen runs' tied groups, or why there are none."""

    #: model -> its letters; empty when there are no groups
    letters: dict[str, str] = field(default_factory=dict)
    #: the groups in one line (``TiedGroups.sentence``)
    sentence: str = ""
    #: the joint comparison (``metrics.comparison.Comparison``), for the fastest-not-worse sentence
    comparison: Any = None
    why: str = ""


@st.cache_data(show_spinner="comparing the models over every chosen run's cells…", max_entries=16)
def joint_groups(_store: Store, store_key: str, run_ids: tuple[str, ...],
                 fingerprints: tuple[tuple[Any, ...], ...]) -> JointGroups:
    """The paired comparison of the runs together (``query.pooled``) and its tied groups."""
    from domainbench.frontend.cached import read_outcomes

    try:
        c = query.pooled(_store, list(run_ids), read=read_outcomes)
    except ValueError as e:  # UserInputError: other images or seeds, one model, unlabelled, no outcomes stored
        return JointGroups(why=str(e))
    except Exception as e:  # a partial run's data the statistics cannot use yet: say so, draw the rest
        log.warning("joint comparison of runs %s failed", ", ".join(run_ids), exc_info=True)
        return JointGroups(why=f"the paired comparison failed on the runs' stored data ({type(e).__name__})")
    return JointGroups(letters=dict(c.groups.letters), sentence=c.groups.sentence(), comparison=c)


def groups_of(store: Store, run_ids: Sequence[str]) -> JointGroups:
    return joint_groups(store, store.description, tuple(run_ids),
                        tuple(query.run_fingerprint(store, r) for r in run_ids))


def costs_across(timings: Sequence[dict[str, dict[str, float]]], ranking: pd.DataFrame) -> list[ModelCost]:
    """Per ranked model its images/s over every chosen run (``metrics.cost.pooled_timings``) against its corrupted
    accuracy as the ranking averages it over the domain columns; empty when no run stored timings."""
    pooled = pooled_timings(timings)
    models = [m for m in ranking["model"] if m in pooled]
    if not models:
        return []
    acc = {m: (None if np.isnan(v) else float(v) / 100.0)
           for m, v in zip(ranking["model"], ranking["corrupted acc %"], strict=True)}
    return model_costs(pooled, models, acc)


def bounds_of(ranking: pd.DataFrame) -> dict[str, tuple[float, float] | None]:
    """Per model the ranking's 95 % interval of its corrupted accuracy (fractions), for the error bars."""
    low, high = "corrupted acc low %", "corrupted acc high %"
    if low not in ranking.columns:
        return {}
    return {m: (None if np.isnan(lo) else (lo / 100.0, hi / 100.0))
            for m, lo, hi in zip(ranking["model"], ranking[low], ranking[high], strict=True)}


def cost_sentence(costs: Sequence[ModelCost], groups: JointGroups) -> str | None:
    return fastest_not_worse(costs, groups.comparison) if costs else None
