"""docker-compose.yml, Dockerfile and .env.example, checked by parsing them (no Docker engine
runs on the build machines): MongoDB with authentication and a named volume, ports on
127.0.0.1 only, a GPU worker, the UI, an optional Ray head, health checks, no secret committed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::?[-?][^}]*)?\}")


def _env_example() -> dict[str, str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return dict(ln.split("=", 1) for ln in lines if ln.strip() and not ln.startswith("#"))


def _env(service: str) -> dict[str, str]:
    return dict(SERVICES[service].get("environment") or {})


def test_mongo_is_the_official_image_with_auth_and_a_named_volume() -> None:
    mongo = SERVICES["mongo"]
    assert re.fullmatch(r"mongo:\d+(\.\d+)*", mongo["image"])  # the official image, a pinned major version
    env = _env("mongo")
    assert env["MONGO_INITDB_ROOT_USERNAME"].startswith("${MONGO_USER")
    # the password has no default: compose refuses to start until .env sets it
    assert env["MONGO_INITDB_ROOT_PASSWORD"].startswith("${MONGO_PASSWORD:?")
    assert "--auth" in mongo["command"]
    volume = mongo["volumes"][0].split(":")
    assert volume[1] == "/data/db" and volume[0] in COMPOSE["volumes"]  # named, not a bind mount


def test_every_published_port_is_bound_to_localhost() -> None:
    published = [(name, p) for name, s in SERVICES.items() for p in s.get("ports", [])]
    assert {n for n, _ in published} >= {"mongo", "ui", "ray-head"}
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_services_connect_to_mongo_with_the_password_from_the_environment() -> None:
    for name in ("ui", "worker", "worker-cpu", "ray-head", "ray-gpu-node"):
        uri = _env(name)["DOMAINBENCH_MONGO_URI"]
        assert uri.startswith("mongodb://${MONGO_USER:-domainbench}:${MONGO_PASSWORD:?") and "@mongo:27017/" in uri
    assert SERVICES["ui"]["depends_on"]["mongo"]["condition"] == "service_healthy"


def test_gpu_worker_reserves_gpus_and_the_ray_head_is_optional() -> None:
    for name in ("worker", "ray-gpu-node"):
        devices = SERVICES[name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert "deploy" not in SERVICES["worker-cpu"]
    assert SERVICES["worker"]["profiles"] == ["gpu"] and SERVICES["worker-cpu"]["profiles"] == ["cpu"]
    assert SERVICES["ray-head"]["profiles"] == ["ray"] and SERVICES["ray-gpu-node"]["profiles"] == ["ray"]
    assert "--head" in SERVICES["ray-head"]["entrypoint"]
    assert "--address=ray-head:6379" in SERVICES["ray-gpu-node"]["entrypoint"]
    # mongo and the UI start with a plain `docker compose up`; nothing else does
    assert {n for n, s in SERVICES.items() if "profiles" not in s} == {"mongo", "ui"}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_service_has_a_health_check(service: str) -> None:
    check = SERVICES[service]["healthcheck"]
    assert check["test"][0] == "CMD" and len(check["test"]) > 1
    assert {"interval", "timeout", "retries"} <= set(check)
    assert "MONGO_PASSWORD" not in " ".join(check["test"])  # a health check never holds the password


def test_configuration_is_by_environment_and_no_secret_is_committed() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    used = set(VAR.findall(text))
    example = _env_example()
    assert used <= set(example), f"variables missing from .env.example: {sorted(used - set(example))}"
    assert example["MONGO_PASSWORD"] == ""  # the example holds no password, not even a weak default
    assert not re.search(r"(?i)password\w*\s*[:=]\s+(?!\$\{)\S", text)  # no literal password in compose
    assert "change-me" not in text
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in dockerignore and ".git" in dockerignore  # COPY . never bakes secrets into the image


def test_dockerfile_installs_the_package_with_extras_and_runs_unprivileged() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    assert any(ln.startswith("ARG EXTRAS=") for ln in lines)
    assert any('pip install -e ".[${EXTRAS}]"' in ln for ln in lines)
    user = [ln for ln in lines if ln.startswith("USER ")]
    assert user and user[-1] != "USER root"
    assert any(ln.startswith("ENTRYPOINT") and "domainbench" in ln for ln in lines)
    assert any("HF_HUB_OFFLINE=1" in ln for ln in lines if ln.startswith("ENV"))
    assert SERVICES["ui"]["build"]["args"]["EXTRAS"].startswith("${DOMAINBENCH_EXTRAS")


def test_compose_extras_exist_in_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    default = re.search(r"DOMAINBENCH_EXTRAS:-(\w+)", (ROOT / "docker-compose.yml").read_text())
    assert default and default.group(1) in extras and "ray" in extras
    assert all(r.startswith("ray") for r in extras["ray"])
