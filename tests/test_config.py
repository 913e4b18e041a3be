"""Domain and run configs: TOML on disk, exact round trip, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domainbench.records.config import CorruptionChoice, DomainConfig, PlannerProvenance, RunConfig, dumps, load_domain, load_run, save
from domainbench.errors import UserInputError

names = st.sampled_from(["gaussian_noise", "fog", "motion_blur", "contrast", "rotation"])
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@st.composite
def domains(draw: st.DrawFn) -> DomainConfig:
    chosen = draw(st.lists(names, unique=True, min_size=1, max_size=4))
    return DomainConfig(
        domain=draw(text),
        corruptions=[
            CorruptionChoice(
                name=n,
                severities=draw(st.lists(st.integers(1, 5), min_size=1, max_size=5, unique=True)),
                params=draw(st.dictionaries(st.sampled_from(["sigma", "angle"]), st.floats(0, 1, allow_nan=False), max_size=2)),
                reason=draw(text),
            )
            for n in chosen
        ],
        planner=PlannerProvenance(provider=draw(st.sampled_from(["offline", "openai"])), samples=draw(st.integers(1, 20)),
                                  frequencies=draw(st.dictionaries(names, st.floats(0, 1, allow_nan=False), max_size=3))),
    )


@settings(max_examples=60, deadline=None)
@given(domains())
def test_domain_toml_round_trip_is_exact(tmp_path_factory: pytest.TempPathFactory, cfg: DomainConfig) -> None:
    path = save(cfg, tmp_path_factory.mktemp("d") / "domain.toml")
    assert load_domain(path, check=False) == cfg


def test_domain_file_has_the_array_of_tables_shape(tmp_path: Path) -> None:
    cfg = DomainConfig(domain="night driving", corruptions=[CorruptionChoice(name="motion_blur", severities=[3, 1], reason="moving car")])
    text = dumps(cfg)
    import tomllib

    raw = tomllib.loads(text)
    assert "[[corruptions]]" in text and "[corruptions.params]" not in text  # no empty tables
    assert "severities = [1, 3]" in text
    assert raw["corruptions"] == [{"name": "motion_blur", "severities": [1, 3], "reason": "moving car"}]


def test_run_config_round_trip_drops_nothing(tmp_path: Path) -> None:
    cfg = RunConfig(models=["open_clip:ViT-B-32/openai", "hf:google/siglip-base-patch16-224"], baseline="open_clip:ViT-B-32/openai",
                    limit=100, classes=["a", "b"], templates=["a photo of a {}."], seed=7, device="cuda")
    assert load_run(save(cfg, tmp_path / "run.toml")) == cfg
    assert load_run(save(RunConfig(), tmp_path / "default.toml")) == RunConfig()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("domain = 'x'\n[[corruptions]]\nname = 'fog'\nseverities = [0, 6]\n", "corruptions.0.severities"),
        ("domain = 'x'\n[[corruptions]]\nname = 'fog'\n[[corruptions]]\nname = 'fog'\n", "listed twice"),
        ("domain = 'x'\ncorruptions = []\nsurprise = 1\n", "surprise"),
        ("domain = 'x'\n[[corruptions]]\nname = 'fgo'\n", "fog"),
        ("domain = 'x'\n[[corruptions]]\nname = 'gaussian_noise'\nparams = { sigma = 99 }\n", "sigma"),
        ("domain = \n", "not valid TOML"),
    ],
)
def test_bad_domain_files_name_the_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(UserInputError, match=message) as e:
        load_domain(path)
    assert str(path) in str(e.value)


def test_templates_need_one_slot() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="exactly one"):
        RunConfig(templates=["a photo"])
    assert RunConfig(templates=["a photo of a {}."]).templates == ["a photo of a {}."]


# ---------------------------------------------------------------- RunConfig validates itself
@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_devices_torch_understands_are_accepted(device: str) -> None:
    assert RunConfig(device=device).device == device


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"device": "gpu"}, "auto, cpu, cuda or cuda:N"),
        ({"device": "cuda:"}, "auto, cpu, cuda or cuda:N"),
        ({"device": "mps"}, "auto, cpu, cuda or cuda:N"),
        ({"models": ["a", "b"], "baseline": "c"}, "baseline 'c' is not among the run's models"),
        ({"baseline": "embedded:nope"}, "add it to --models"),
        ({"models": []}, "at least one model"),
        ({"models": ["a", "b", "a"]}, "model listed twice: a"),
        ({"batch_size": 0}, "greater than or equal to 1"),
        ({"limit": 0}, "greater than or equal to 1"),
        ({"seed": -1}, "greater than or equal to 0"),
        ({"workers": -1}, "greater than or equal to 0"),
        ({"classes": ["cat", "cat"]}, "class listed twice"),
    ],
)
def test_run_config_rejects_what_would_fail_later(fields: dict, message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        RunConfig(**fields)


def test_baseline_among_the_models_is_kept() -> None:
    cfg = RunConfig(models=["a", "b"], baseline="b")
    assert cfg.baseline_model == "b" and RunConfig(models=["a", "b"]).baseline_model == "a"


# ---------------------------------------------------------------- file, then flags on top
def test_from_sources_puts_flags_over_the_file_over_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('models = ["a", "b"]\nbatch_size = 7\nseed = 3\ndevice = "cpu"\n')
    cfg = RunConfig.from_sources(path, {"seed": 5, "batch_size": None, "limit": 10, "templates": None})
    assert (cfg.models, cfg.batch_size, cfg.seed, cfg.device, cfg.limit) == (["a", "b"], 7, 5, "cpu", 10)
    assert cfg.image_size == RunConfig().image_size and cfg.templates is None  # untouched: the defaults
    assert RunConfig.from_sources() == RunConfig()
    assert RunConfig.from_sources(None, {"limit": 3, "models": None}) == RunConfig(limit=3)


def test_from_sources_flags_may_fix_what_the_file_lacks(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('models = ["a"]\n')
    cfg = RunConfig.from_sources(path, {"models": ["a", "b"], "baseline": "b"})
    assert cfg.models == ["a", "b"] and cfg.baseline == "b"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batch_size": 0}, "--batch-size: Input should be greater than or equal to 1"),
        ({"templates": ["no slot"]}, "--template: each prompt template needs exactly one {}"),
        ({"device": "gpu"}, "--device: device 'gpu' is not one of auto, cpu, cuda or cuda:N"),
        ({"baseline": "x"}, "--baseline: baseline 'x' is not among the run's models"),
        ({"stability_points": 0}, "--stability-points: "),
    ],
)
def test_from_sources_errors_name_the_flag(overrides: dict, message: str) -> None:
    with pytest.raises(UserInputError) as e:
        RunConfig.from_sources(None, overrides)
    assert str(e.value).startswith(message), str(e.value)


def test_from_sources_error_names_the_file_when_its_value_is_the_culprit(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('models = ["a", "b"]\nbaseline = "b"\n')
    with pytest.raises(UserInputError) as e:
        RunConfig.from_sources(path, {"models": ["a"]})  # the flag drops the file's baseline
    assert str(e.value).startswith(f"run config {path}: baseline: baseline 'b' is not among the run's models ['a']")
    path.write_text('device = "gpu"\n')
    with pytest.raises(UserInputError, match=f"config file {path}: device: device 'gpu'"):
        RunConfig.from_sources(path, {})
