"""Typed repositories: the collection names live in one enum, each record kind has its repository,
and views of the store (the worker's lease-fenced one) fence the repositories' writes too."""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance
from domainbench.store.base import Store
from domainbench.store.collections import KEY_FIELDS, Collection
from domainbench.store.indexes import INDEXES
from domainbench.store.queue import LeaseLost
from domainbench.store.records import CURRENT_VERSIONS, RECORDS, DomainRecord, UnitRecord
from domainbench.store.repositories import domain_id
from domainbench.app.worker import OwnedStore

ROOT = Path(__file__).resolve().parents[2]
STORE_METHODS = {"upsert", "upsert_many", "find", "get", "keys", "delete"}


def unit(run: str = "r1", model: str = "m", corruption: str = "fog", severity: int = 1, shard: int = 0) -> UnitRecord:
    return UnitRecord(run_id=run, model=model, corruption=corruption, severity=severity, shard=shard, n=2,
                      confusion=[[1, 0], [0, 1]], flips=0, seed=0, classes=["a", "b"])


def test_every_collection_is_declared_with_keys_record_version_and_index() -> None:
    assert set(KEY_FIELDS) == set(Collection) == set(RECORDS) == set(CURRENT_VERSIONS)
    for c in Collection:
        assert INDEXES[c][0].fields == tuple((f, 1) for f in KEY_FIELDS[c])
        assert set(KEY_FIELDS[c]) <= set(RECORDS[c].model_fields)


def test_product_code_names_no_collection_by_a_string() -> None:
    """Outside the store package, a collection is reached through its repository, never a literal."""
    names = {c.value for c in Collection}
    found = []
    for folder in ("backend", "frontend"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.parent.name == "store" and path.parent.parent.name == "backend":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STORE_METHODS
                        and "store" in ast.unparse(node.func.value).lower()
                        and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_unit_repository_round_trip(store: Store) -> None:
    store.units.put(unit(shard=0))
    store.units.put_many([unit(shard=1), unit(run="r2")])
    store.units.put(unit(shard=1))  # same key: replaced, not duplicated
    assert sorted(u.shard for u in store.units("r1")) == [0, 1]
    assert store.units.keys(run_id="r1") == {("r1", "m", "fog", 1, 0), ("r1", "m", "fog", 1, 1)}
    assert store.units.get(run_id="r1", model="m", corruption="fog", severity=1, shard=1) == unit(shard=1)
    assert store.units.get(run_id="r1", model="m", corruption="fog", severity=1, shard=9) is None
    assert store.units.delete(run_id="r1") == 2
    assert store.units.keys() == {("r2", "m", "fog", 1, 0)}
    # the repository and the collection-named API read the same documents
    assert store.find("units", run_id="r2") == store.units("r2")


def test_domain_save_builds_the_record_once_keyed_by_its_content(store: Store) -> None:
    plan = DomainConfig(domain="night dash-cam", corruptions=[CorruptionChoice(name="fog", severities=[2, 1])],
                        planner=PlannerProvenance(created_at="2026-01-01T00:00:00+00:00"))
    # the id is the hash of the plan without its planning time: computed here independently
    body = plan.model_dump(mode="json")
    body["planner"].pop("created_at")
    body.pop("compositions", None)  # a plan without compositions hashes as before they existed
    expected = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    assert domain_id(plan) == expected
    assert store.domains.save(plan, created_at="t1") == expected
    replanned = plan.model_copy(update={"planner": plan.planner.model_copy(update={"created_at": "later"})})
    assert store.domains.save(replanned, created_at="t2") == expected
    (stored,) = store.domains.find()
    assert isinstance(stored, DomainRecord)
    assert (stored.domain_id, stored.created_at, stored.corruptions[0].severities) == (expected, "t2", [1, 2])


class _ExpiredLease:
    run_id = "r1"
    worker = "w1"  # the store's fence names it too
    epoch = None  # the fence then takes the stored one

    def check(self) -> None:
        raise LeaseLost("lease ran out")

    def update(self, **fields: Any) -> None:
        self.check()


def test_repositories_of_the_workers_store_are_fenced_by_its_lease(store: Store) -> None:
    owned = OwnedStore(store, _ExpiredLease())  # type: ignore[arg-type]
    store.units.put(unit(shard=0))
    with pytest.raises(LeaseLost):
        owned.units.put(unit(shard=1))
    with pytest.raises(LeaseLost):
        owned.units.delete(run_id="r1")
    with pytest.raises(LeaseLost):
        owned.reports.delete(run_id="r1")
    # reads go through, and nothing was written or deleted
    assert owned.units.keys(run_id="r1") == {("r1", "m", "fog", 1, 0)}


def test_plans_with_and_without_compositions_are_read_back(home) -> None:  # noqa: ANN001 - the home fixture
    # a plan with compositions is version 2, one with real shifts 3; one without stays version 1; all read back as stored
    from domainbench.records.config import Composition, CompositionStep, CorruptionChoice, DomainConfig, RealShift
    from domainbench.store import open_store

    store = open_store()
    old = DomainConfig(domain="plain", corruptions=[CorruptionChoice(name="fog", severities=[1])])
    new = old.model_copy(update={"domain": "stacked"})
    new = DomainConfig.model_validate({**new.model_dump(), "compositions": [Composition(
        name="c", steps=[CompositionStep(corruption="fog", severity=1), CompositionStep(corruption="rain", severity=2)]).model_dump()]})
    shifted = DomainConfig.model_validate({**old.model_dump(), "domain": "shifted",
                                           "shift": [RealShift(name="night", path="/data/night").model_dump()]})
    assert (old.schema_version, new.schema_version, shifted.schema_version) == (1, 2, 3)
    ids = [store.domains.save(cfg, created_at="2025-01-01T00:00:00+00:00") for cfg in (old, new, shifted)]
    got = {d.domain: d for d in store.find("domains")}
    assert [got[d].schema_version for d in ("plain", "stacked", "shifted")] == [1, 2, 3]
    assert got["stacked"].compositions == new.compositions and len(set(ids)) == 3
    assert got["shifted"].shift == shifted.shift
    store.close()
