"""Domain and run configs: TOML on disk, exact round trip, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.config import CorruptionChoice, DomainConfig, PlannerProvenance, RunConfig, dumps, load_domain, load_run, save
from backend.errors import UserInputError

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
