"""One registry pattern for corruptions, model backends, dataset kinds and planner providers."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from domainbench import corruptions
from domainbench.data import DATASET_KINDS, DatasetKind, UnknownDatasetError, list_dataset_kinds, open_dataset, register_dataset_kind
from domainbench.errors import UserInputError
from domainbench.models import MODEL_BACKENDS, UnknownModelError, create_model, list_models, register_model
from domainbench.planner import plan
from domainbench.planner.providers import PLANNER_PROVIDERS, PlannerProvider, UnknownProviderError, register_provider
from domainbench.corruptions import CorruptionError, Registry

ALL = (corruptions.REGISTRY, MODEL_BACKENDS, DATASET_KINDS, PLANNER_PROVIDERS)


# -- the generic class -------------------------------------------------------------------------
def test_registry_basics():
    reg: Registry[int] = Registry("widget", error=KeyError, normalise=str.lower)
    assert reg.register("alpha", 1) == 1
    reg.register("alpha", 1)  # the same object again is not a clash
    reg.register("beta", 2)
    reg.register("alphabet", 3)
    with pytest.raises(KeyError, match="widget 'alpha' is already registered"):
        reg.register("alpha", 4)
    reg.register("alpha", 4, replace=True)
    assert reg.get("alpha") == 4 and reg.get("ALPHA") == 4  # normalised spelling
    assert reg.names() == ["alpha", "alphabet", "beta"] and reg.names("alpha*") == ["alpha", "alphabet"]
    assert reg.names("?eta") == ["beta"] and "beta" in reg and "gamma" not in reg and len(reg) == 3
    with pytest.raises(KeyError, match="unknown widget 'alpah'; did you mean 'alpha'") as e:
        reg.get("alpah")
    assert "known: alpha, alphabet, beta" in str(e.value)
    reg.unregister("beta")
    assert reg.names() == ["alpha", "alphabet"]
    assert reg.origin("alpha") == "register()"


# -- duplicates ----------------------------------------------------------------------------------
def _spec(name: str) -> corruptions.CorruptionSpec:
    return corruptions.CorruptionSpec(
        name=name, family="digital", description="Copies the image.", situations=["tests"],
        params_model=corruptions.Params, ladder={s: {} for s in range(1, 6)},
        apply=lambda img, p, rng: img.copy(), ordinal=False,
    )


def test_duplicate_corruption_is_refused():
    with pytest.raises(CorruptionError, match="corruption 'fog' is already registered"):
        corruptions.register(_spec("fog"))
    assert corruptions.get("fog").family == "weather"


def test_duplicate_model_backend_is_refused():
    with pytest.raises(UnknownModelError, match="model backend 'embedded' is already registered") as e:
        register_model("embedded")(lambda spec, device: None)  # type: ignore[arg-type,return-value]
    assert isinstance(e.value, UserInputError)
    assert create_model("embedded:fmnist-plain", "cpu").name == "embedded:fmnist-plain"


def test_duplicate_dataset_kind_is_refused():
    other = DatasetKind("another sample", lambda spec: False, lambda s, c, n: open_dataset("sample"))
    with pytest.raises(UnknownDatasetError, match="dataset kind 'sample' is already registered") as e:
        register_dataset_kind("sample", other)
    assert isinstance(e.value, UserInputError)
    original = DATASET_KINDS.get("sample")
    try:
        register_dataset_kind("sample", other, replace=True)  # explicit replacement is allowed
        assert DATASET_KINDS.get("sample") is other
    finally:
        register_dataset_kind("sample", original, replace=True)


def test_duplicate_planner_provider_is_refused():
    mine = PlannerProvider(lambda text, n, cat, settings: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(UnknownProviderError, match="planner provider 'offline' is already registered") as e:
        register_provider("offline", mine)
    assert isinstance(e.value, UserInputError)
    with pytest.raises(UnknownProviderError, match="'auto' chooses among the providers"):
        register_provider("auto", mine)


# -- unknown names -----------------------------------------------------------------------------
def test_unknown_names_are_answered_with_close_matches():
    with pytest.raises(CorruptionError, match="unknown corruption 'motion_blr'; did you mean 'motion_blur'"):
        corruptions.get("motion_blr")
    with pytest.raises(UnknownModelError, match="Did you mean embedded:fmnist-plain"):
        create_model("embeded:fmnist-plain", "cpu")
    with pytest.raises(UnknownModelError, match="unknown model backend 'opne_clip'; did you mean 'open_clip'"):
        MODEL_BACKENDS.get("opne_clip")
    with pytest.raises(UserInputError, match="dataset path smaple does not exist.*did you mean 'sample'"):
        open_dataset("smaple")
    with pytest.raises(UnknownDatasetError, match="unknown dataset kind 'manifst'; did you mean 'manifest'"):
        open_dataset("x.csv", kind="manifst")
    with pytest.raises(UnknownProviderError, match="provider must be one of auto, offline, openai, got 'ofline'; did you mean 'offline'"):
        plan("dash-cam at night", provider="ofline")


# -- wildcards ---------------------------------------------------------------------------------
def test_listing_with_wildcards():
    assert corruptions.names("*_blur") == ["defocus_blur", "gaussian_blur", "glass_blur", "motion_blur", "zoom_blur"]
    assert corruptions.names("[fs]now") == ["snow"]
    assert list_models("embedded:*") == ["embedded:fmnist-augmented", "embedded:fmnist-plain"]
    assert MODEL_BACKENDS.names("*") == sorted({"embedded", "open_clip", "hf", "local"} | set(MODEL_BACKENDS.names()))
    assert list_dataset_kinds("*folder") == ["image_folder", "unlabeled_folder"]
    assert PLANNER_PROVIDERS.names("o*") == ["offline", "openai"]


# -- entry-point plug-ins ----------------------------------------------------------------------
PLUGIN = '''
import numpy as np
from domainbench import corruptions
from domainbench.data import DatasetKind, open_dataset
from domainbench.models import ModelBackend


class InvertParams(corruptions.Params):
    pass


def invert(img, p, rng):
    return 255 - img


CORRUPTIONS = [
    corruptions.CorruptionSpec(
        name="plugin_invert", family="digital", description="Inverts the image.", situations=["negative film"],
        params_model=InvertParams, ladder={s: {} for s in range(1, 6)}, apply=invert, ordinal=False,
    )
]


class Model:
    def __init__(self, spec, device):
        self.name, self.device = f"plugfake:{spec}", device


def create(spec, device):
    return Model(spec, device)


BACKEND = ModelBackend(create, known=("tiny", "small"))

DATASET = DatasetKind(
    "every spec starting with plug://", lambda spec: spec.startswith("plug://"),
    lambda spec, classes, size: open_dataset("sample").subset(10), precedence=5,
)
'''


def _install(root: Path, dist: str, module: str, source: str, entry_points: str) -> None:
    """A plug-in as pip would leave it: a module and a ``.dist-info`` with its entry points."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def plugins_reloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A site directory on sys.path for test plug-ins; every registry rescans its entry points."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for reg in ALL:
        reg.reset_plugins()
    yield tmp_path
    monkeypatch.undo()  # the site directory leaves sys.path before the registries rescan
    for name in [m for m in sys.modules if m.startswith("domainbench_test")]:
        del sys.modules[name]
    for reg in ALL:
        reg.reset_plugins()


def test_entry_point_plug_ins_are_loaded_lazily(plugins_reloaded: Path):
    _install(plugins_reloaded, "domainbench-testplugin", "domainbench_testplugin", PLUGIN, """
        [domainbench.corruptions]
        invert = domainbench_testplugin
        [domainbench.models]
        plugfake = domainbench_testplugin:BACKEND
        [domainbench.datasets]
        plug = domainbench_testplugin:DATASET
    """)
    assert "domainbench_testplugin" not in sys.modules  # nothing is imported before the first look-up

    img = np.arange(16 * 16 * 3, dtype=np.uint8).reshape(16, 16, 3)
    assert "plugin_invert" in corruptions.names("plugin_*")
    np.testing.assert_array_equal(corruptions.corrupt(img, "plugin_invert", severity=3), 255 - img)
    assert corruptions.REGISTRY.origin("plugin_invert") == "entry point 'invert'"

    assert list_models("plugfake:*") == ["plugfake:small", "plugfake:tiny"]
    model = create_model("plugfake:tiny", "cpu")
    assert model.name == "plugfake:tiny" and str(model.device) == "cpu"

    ds = open_dataset("plug://anything")
    assert len(ds) == 10 and ds.classes == open_dataset("sample").classes
    assert "plug" in list_dataset_kinds()


def test_plug_ins_are_gone_after_a_reset(plugins_reloaded: Path):
    # the previous test's site directory is gone: its entries must not linger
    assert not corruptions.names("plugin_*")
    assert not list_models("plugfake:*")
    assert "plug" not in list_dataset_kinds()


def test_planner_provider_plug_in(plugins_reloaded: Path):
    _install(plugins_reloaded, "domainbench-testplanner", "domainbench_testplanner", textwrap.dedent('''
        from domainbench.planner.providers import PLANNER_PROVIDERS, PlannerProvider
        PROVIDER = PlannerProvider(lambda text, n, cat, settings: None, ready=lambda settings: False,
                                   not_ready="provider 'echo' needs nothing but is never ready")
    '''), """
        [domainbench.planners]
        echo = domainbench_testplanner:PROVIDER
    """)
    assert PLANNER_PROVIDERS.names() == ["echo", "offline", "openai"]
    with pytest.raises(UserInputError, match="provider 'echo' needs nothing"):
        plan("dash-cam at night", provider="echo")


def test_a_broken_plug_in_names_itself(plugins_reloaded: Path):
    _install(plugins_reloaded, "domainbench-testbroken", "domainbench_testbroken", "raise ImportError('no torch here')\n", """
        [domainbench.corruptions]
        broken = domainbench_testbroken
        [domainbench.models]
        brokenmodel = domainbench_testbroken:create
    """)
    with pytest.raises(CorruptionError, match=r"corruption plug-in 'broken' \(domainbench_testbroken, from domainbench-testbroken\).*no torch here"):
        corruptions.names()
    # reported once; the registry keeps working and says why a name may be missing
    assert "fog" in corruptions.names()
    with pytest.raises(CorruptionError, match="plug-in 'broken' failed to load: ImportError: no torch here"):
        corruptions.get("brokn")
    with pytest.raises(UnknownModelError, match="model backend plug-in 'brokenmodel'"):
        list_models()
