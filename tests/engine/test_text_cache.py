"""Text embeddings once: the zero-shot classifier is cached in the store per (model, classes,
templates) and read back bit for bit; built-in label sets and templates come from open_clip;
prompts are encoded in batches; duplicate class names are refused."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from open_clip import zero_shot_metadata as meta

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.engine.runner import Engine
from domainbench.engine.text_cache import PROBE, cached_classifier
from domainbench.errors import UserInputError
from domainbench.models import build_classifier, create_model
from domainbench.records.label_sets import resolve_classes, resolve_templates
from domainbench.store import open_store
from domainbench.store.collections import Collection
from tests.cli_runner import run_cli

import fake_models  # noqa: E402  (the fake: backend, on the path through conftest)

DOMAIN = DomainConfig(domain="cache", corruptions=[CorruptionChoice(name="brightness", severities=[2], reason="r")])


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every batch of texts the fake models encode."""
    calls: list[list[str]] = []
    original = fake_models.FakeModel.encode_text

    def counting(self, texts):  # type: ignore[no-untyped-def]
        calls.append(list(texts))
        return original(self, texts)

    monkeypatch.setattr(fake_models.FakeModel, "encode_text", counting)
    return calls


def test_a_rerun_reads_the_classifier_instead_of_encoding_prompts(home: Path, encoded: list[list[str]]) -> None:
    store = open_store()
    cfg = RunConfig(models=["fake:a"], limit=20, workers=0, stability=False, threat=False)
    a = Engine(store).start(DOMAIN, cfg)
    prompts = [t for batch in encoded for t in batch if t != PROBE]
    assert len(prompts) == 10 * 5  # the sample's classes × the default templates, once
    encoded.clear()
    b = Engine(store).start(DOMAIN, cfg)
    assert encoded == [[PROBE]]  # only the probe that checks the weights behind the name
    assert len(store.find(Collection.TEXT_EMBEDDINGS)) == 1
    ua = {(u.corruption, u.shard): list(u.preds) for u in store.units(a)}
    assert ua == {(u.corruption, u.shard): list(u.preds) for u in store.units(b)}


def test_an_fmr_run_reads_the_classifiers_a_corruption_run_cached(home: Path, encoded: list[list[str]]) -> None:
    """FMR's tested models and its oracle build their classifiers through the same cache as the engine."""
    from domainbench.records.config import FmrSettings

    store = open_store()
    cfg = RunConfig(models=["fake:a"], limit=10, workers=0, stability=False, threat=False)
    Engine(store).start(DOMAIN, cfg)
    encoded.clear()
    settings = FmrSettings(oracle=["fake:a", "fake:b"], budget=1, candidates=1, shard_size=5)
    first = Engine(store).start(DOMAIN, cfg, fmr=settings)
    prompts = [t for batch in encoded for t in batch if t != PROBE]
    assert len(prompts) == 10 * 5  # fake:b's prompts alone: tested fake:a and the oracle's fake:a hit the cache
    assert len(store.find(Collection.TEXT_EMBEDDINGS)) == 2
    encoded.clear()
    again = Engine(store).start(DOMAIN, cfg, fmr=settings)
    assert [t for batch in encoded for t in batch if t != PROBE] == []  # every classifier read back
    assert [r.clean_preds for r in store.fmr(again)] == [r.clean_preds for r in store.fmr(first)]


def test_cached_rows_equal_the_built_classifier_bit_for_bit(home: Path) -> None:
    store = open_store()
    model = create_model("fake:a", "cpu")
    classes = ["cat", "dog", "bird"]
    built = build_classifier(model, classes, ["a {}."])
    first = cached_classifier(store, model, classes, ["a {}."])
    again = cached_classifier(store, model, classes, ["a {}."])
    assert torch.equal(first, built) and torch.equal(again, built)
    other = cached_classifier(store, model, classes, ["the {}."])  # other templates: another entry
    assert not torch.equal(other, built) and len(store.find(Collection.TEXT_EMBEDDINGS)) == 2
    # another model behind the same name (other weights) misses the cache
    impostor = create_model("fake:b", "cpu")
    impostor.name = model.name
    assert torch.equal(cached_classifier(store, impostor, classes, ["a {}."]), build_classifier(impostor, classes, ["a {}."]))


def test_builtin_label_set_and_templates_come_from_open_clip() -> None:
    names = resolve_classes(["imagenet1k"])
    assert names is not None and len(names) == len(set(names)) == 1000
    differ = [i for i, (a, b) in enumerate(zip(names, meta.IMAGENET_CLASSNAMES)) if a != b]
    assert differ == [744, 836] and meta.IMAGENET_CLASSNAMES[744] == meta.IMAGENET_CLASSNAMES[657]
    assert resolve_templates(["openai80"]) == [f("{}") for f in meta.OPENAI_IMAGENET_TEMPLATES]
    assert len(resolve_templates(["openai80"])) == 80 and len(resolve_templates(["simple"])) == 7
    assert resolve_templates(["a {}"]) == ["a {}"] and resolve_classes(["x", "y"]) == ["x", "y"]
    assert RunConfig(templates=["openai80"]).templates == ["openai80"]  # stored by name, resolved when used


def test_prompts_are_encoded_in_batches_across_classes(encoded: list[list[str]]) -> None:
    model = create_model("fake:a", "cpu")
    classes = resolve_classes(["imagenet1k"])[:100]  # type: ignore[index]
    clf = build_classifier(model, classes, ["openai80"], batch_size=256)
    assert clf.shape == (100, fake_models.DIM)
    assert [len(b) for b in encoded] == [256] * 31 + [8000 - 31 * 256]
    assert len(encoded) == math.ceil(100 * 80 / 256)


def test_duplicate_class_names_are_refused_naming_them(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    with pytest.raises(UserInputError, match="'cat'.*distinct"):
        resolve_classes(["cat", "dog", "cat"])
    # class folders whose names read alike once underscores become spaces
    for folder in ("ice_cream", "ice cream", "cake"):
        (tmp_path / "ds" / folder).mkdir(parents=True)
        Image.fromarray(np.full((8, 8, 3), 128, np.uint8)).save(tmp_path / "ds" / folder / "x.png")
    (tmp_path / "d.toml").write_text('domain = "x"\n[[corruptions]]\nname = "brightness"\nseverities = [1]\nreason = "r"\n')
    code, _, err = run_cli(["run", str(tmp_path / "d.toml"), "--models", "fake:a", "--dataset", str(tmp_path / "ds")],
                           capsys, monkeypatch)
    assert code == 2 and err.strip() == (f"error: dataset {tmp_path / 'ds'} names a class more than once ('ice cream'); "
                                         "give every class a distinct name")
    assert open_store().list_runs() == []  # nothing was written
