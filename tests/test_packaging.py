"""The wheel is the product: built, installed non-editable into a fresh venv, run outside the checkout.

The fresh venv gets its dependencies from this venv's site-packages through a ``.pth`` line.
A path added that way is appended to ``sys.path`` but the ``.pth`` files inside it are not
processed, so this venv's editable-install finder (which maps ``domainbench`` & co. to the
checkout) stays inert: everything the product imports or reads must come from the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from domainbench.planner.prompts import TEMPLATE_FILES
from tests.planner.planner_fakes import FakeLLM, Reply, answer

REPO = Path(__file__).resolve().parents[1]
#: the checkout's folders and where the wheel puts them (pyproject's package-dir): one top-level name
PACKAGES = {"backend": "domainbench", "corruptions": "domainbench/corruptions", "frontend": "domainbench/frontend",
            "prompts": "domainbench/prompts"}
# the kinds of file the packages ship (code and data): every one in the checkout must be in the wheel
DATA_SUFFIXES = {".py", ".txt", ".json", ".toml", ".npz", ".safetensors", ".md"}
# checkout-only build and cache outputs, never copied to the build folder
GENERATED = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                   ".hypothesis", ".domainbench")
TIMEOUT_S = 600

DOMAIN = "dash-cam footage at night, rain on the windscreen"
PLANNED = (("brightness", [1, 2]), ("contrast", [1, 2]), ("gaussian_noise", [2, 3]), ("motion_blur", [1, 2, 3]),
           ("rain", [1, 2]), ("shadow", [1, 2]))


@dataclass(frozen=True)
class Installed:
    venv: Path
    work: Path  # a working directory outside the checkout
    env: dict[str, str]

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def run(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.work, env={**self.env, **(extra_env or {})}, capture_output=True,
                              text=True, timeout=TIMEOUT_S)


def _ignore(directory: str, names: list[str]) -> set[str]:
    skip = set(GENERATED(directory, names))
    # virtual environments (.venv or any other name) are not sources either
    skip.update(n for n in names if (Path(directory) / n / "pyvenv.cfg").is_file())
    return skip


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a copy, so the build writes its build/ and egg-info there and never reuses stale files
    src = tmp_path_factory.mktemp("source") / "domainbench"
    shutil.copytree(REPO, src, ignore=_ignore)
    return src


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(dist)],
        env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    _check(proc, "pip wheel")
    (whl,) = dist.glob("domainbench-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    venv = tmp_path_factory.mktemp("venv") / "env"
    _check(subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True,
                          timeout=TIMEOUT_S), "python -m venv")
    py = venv / "bin" / "python"
    # no PYTHONPATH: a checkout on it (with its egg-info) would make pip think the wheel is already installed
    pip_env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
               "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    _check(subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", str(wheel)],
                          env=pip_env, capture_output=True, text=True, timeout=TIMEOUT_S), "pip install")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "_parent_site_packages.pth").write_text("".join(f"{p}\n" for p in parents))

    work = tmp_path_factory.mktemp("work")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DOMAINBENCH_", "OPENAI_")) and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
    env = {
        **clean,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "DOMAINBENCH_HOME": str(work / "home"),
        "DOMAINBENCH_CACHE_DIR": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "NO_ALBUMENTATIONS_UPDATE": "1",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
        "COLUMNS": "200",  # rich tables: no truncated model names
    }
    return Installed(venv, work, env)


def test_wheel_holds_the_packages_and_their_data(wheel: Path, source: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"domainbench", dist_info}, "only the runtime packages ship, under one name"

    in_checkout = {
        f"{installed_as}/{p.relative_to(source / folder).as_posix()}"
        for folder, installed_as in PACKAGES.items()
        for p in (source / folder).rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts
    }
    assert sorted(in_checkout - names) == []
    assert {
        *(f"domainbench/prompts/planner/{f}" for f in TEMPLATE_FILES),
        "domainbench/planner/rules.toml",
        "domainbench/data/sample/fashion_mnist_sample.npz",
        "domainbench/models/weights/fmnist-plain.safetensors",
        "domainbench/models/weights/fmnist-augmented.safetensors",
        "domainbench/models/weights/MODEL_CARD.md",
        "domainbench/frontend/app.py",
        "domainbench/frontend/views/runs.py",
    } <= names
    # the training script and the test oracles stay in the checkout
    assert not [n for n in names if re.search(r"train_embedded|stability_reference|oracles", n)]

    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "domainbench = domainbench.app.cli:main" in entry_points


def test_installed_packages_come_from_the_wheel(installed: Installed) -> None:
    code = ("import domainbench; from domainbench import corruptions, frontend, prompts; "
            "print('\\n'.join(m.__file__ for m in (domainbench, corruptions, frontend, prompts)))")
    proc = installed.run(str(installed.bin / "python"), "-c", code)
    _check(proc, "import")
    files = proc.stdout.split()
    assert len(files) == 4 and all(Path(f).is_relative_to(installed.venv) for f in files), files


def test_installed_plan_with_an_llm_reads_the_packaged_prompts(installed: Installed, fake_llm: FakeLLM) -> None:
    fake_llm.script = lambda req, n: Reply(content=answer(*PLANNED))
    llm_env = {
        "DOMAINBENCH_LLM_BASE_URL": fake_llm.base_url,
        "DOMAINBENCH_LLM_API_KEY": "sk-test-key-000",
        "DOMAINBENCH_LLM_MODEL": "fake-model",
        "DOMAINBENCH_LLM_MAX_RETRIES": "0",
    }
    proc = installed.run(str(installed.bin / "domainbench"), "plan", DOMAIN, "--provider", "openai", "--samples", "2",
                         extra_env=llm_env)
    _check(proc, "domainbench plan")
    for name, _ in PLANNED:
        assert f'name = "{name}"' in proc.stdout, proc.stdout
    assert 'provider = "openai"' in proc.stdout
    assert len(fake_llm.requests) == 2
    system = fake_llm.requests[0]["messages"][0]["content"]
    shipped = next(installed.venv.glob("lib/python*/site-packages/domainbench/prompts/planner/system.txt"))
    assert system == shipped.read_text(encoding="utf-8").strip()
    assert DOMAIN in fake_llm.requests[0]["messages"][1]["content"]


def test_installed_demo_compares_both_embedded_models(installed: Installed) -> None:
    proc = installed.run(str(installed.bin / "domainbench"), "--quiet", "demo", "--limit", "64")
    _check(proc, "domainbench demo")
    for model in ("embedded:fmnist-plain", "embedded:fmnist-augmented"):
        # a summary row: the model, then its clean balanced accuracy in percent
        assert re.search(rf"^\s*{re.escape(model)}\s+\d+\.\d\s", proc.stdout, re.MULTILINE), proc.stdout
    assert (installed.work / "home" / "demo-domain.toml").is_file()
