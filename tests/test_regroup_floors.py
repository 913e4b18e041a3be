"""scripts/regroup_floors.py: the rewriting of references to moved modules, on old-style snippets, and that
it is idempotent (the lead runs it again after merging branches written against the old layout)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("regroup_floors", ROOT / "scripts" / "regroup_floors.py")
regroup = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regroup)
rewrite = regroup.rewrite

OLD_STYLE = '''\
import domainbench.config
from domainbench.config import DomainConfig, RunConfig
from domainbench import cli, api
from domainbench import host_memory  # noqa: F401 - applied on import
from domainbench import resource_bounds as bounds
from domainbench.engine import export, runner
from domainbench.engine.confidence import load_intervals
from domainbench import (
    settings,  # the reader
    query,
)


def f(monkeypatch):
    from domainbench.engine import gate as g
    monkeypatch.setattr("domainbench.settings.Settings.from_env", None)
    with mock.patch("domainbench.engine.export.cell_rows"):
        return domainbench.config.DomainConfig, importlib.import_module("domainbench.worker")

BOOT = "import sys; from domainbench.cli import main; from domainbench import heartbeat, errors; main()"
# see backend/config.py and backend/engine/export.py, engine/export.py (engine.export.to_csv, not self.engine.gate)
SETTINGS = ROOT / "backend" / "settings.py", ROOT / 'backend' / 'engine' / 'gate.py'
'''

NEW_STYLE = '''\
import domainbench.records.config
from domainbench.records.config import DomainConfig, RunConfig
from domainbench.app import cli
from domainbench import api
from domainbench.runtime import host_memory  # noqa: F401 - applied on import
from domainbench.runtime import resource_bounds as bounds
from domainbench.query import export
from domainbench.engine import runner
from domainbench.query.confidence import load_intervals
from domainbench.runtime import settings
from domainbench import query


def f(monkeypatch):
    from domainbench.query import gate as g
    monkeypatch.setattr("domainbench.runtime.settings.Settings.from_env", None)
    with mock.patch("domainbench.query.export.cell_rows"):
        return domainbench.records.config.DomainConfig, importlib.import_module("domainbench.app.worker")

BOOT = "import sys; from domainbench.app.cli import main; from domainbench.runtime import heartbeat; from domainbench import errors; main()"
# see backend/records/config.py and backend/query/export.py, query/export.py (query.export.to_csv, not self.engine.gate)
SETTINGS = ROOT / "backend" / "runtime" / "settings.py", ROOT / 'backend' / 'query' / 'gate.py'
'''


def test_old_style_references_are_rewritten() -> None:
    assert rewrite(OLD_STYLE) == NEW_STYLE


def test_rewriting_twice_changes_nothing() -> None:
    assert rewrite(NEW_STYLE) == NEW_STYLE
    assert rewrite(rewrite(OLD_STYLE)) == rewrite(OLD_STYLE)


@pytest.mark.parametrize("text", [
    "import domainbench.configs\n",                       # a longer name is another module
    "from domainbench.store.records import RunRecord\n",  # store.records is not the records floor's
    "from domainbench.planner.settings import X\n",       # a module named like a moved one, elsewhere
    "x = self.domainbench.config\n",                       # an attribute path, not the package
    "from domainbench import query, api, corruptions\n",  # nothing moved
    'entry = "domainbench.reporting"\n',
    "tests/engine/test_export.py and backend/engine/runner.py\n",
])
def test_what_did_not_move_is_left_alone(text: str) -> None:
    assert rewrite(text) == text


def test_relative_imports() -> None:
    # seen from the root package, .config and .engine.export are moved modules: made absolute and new
    assert rewrite("from .config import RunConfig\n", package="domainbench") == (
        "from domainbench.records.config import RunConfig\n")
    assert rewrite("from ..engine import export, runner\n", package="domainbench.frontend") == (
        "from domainbench.query import export\nfrom domainbench.engine import runner\n")
    assert rewrite("    from . import cli\n", package="domainbench") == "    from domainbench.app import cli\n"
    # a relative import of a module that stays, in a file that stays: untouched
    assert rewrite("from .errors import UserInputError\n", package="domainbench") == "from .errors import UserInputError\n"
    # in a file being moved its package changes, so every relative import is made absolute
    assert rewrite("from .errors import UserInputError\n", package="domainbench", moved_file=True) == (
        "from domainbench.errors import UserInputError\n")
    # without a package (a doc, a string) a relative import cannot be resolved: left as it is
    assert rewrite("from .config import X\n") == "from .config import X\n"


def test_entry_points_and_pyproject_strings() -> None:
    toml = '[project.scripts]\ndomainbench = "domainbench.cli:main"\n'
    assert rewrite(toml) == '[project.scripts]\ndomainbench = "domainbench.app.cli:main"\n'


def test_every_move_lands_in_a_floor_folder_and_no_two_collide() -> None:
    moves = regroup.file_moves()
    assert len(set(moves.values())) == len(moves)
    assert all(new.startswith(("backend/runtime/", "backend/records/", "backend/query/", "backend/app/",
                               "backend/service/")) for new in moves.values())
    assert regroup.path_of("domainbench.engine.export") == "backend/engine/export.py"
    assert regroup.path_of("domainbench.frontend.views.runs") == "frontend/views/runs.py"


def test_the_tree_is_regrouped_and_names_no_old_module() -> None:
    # the script's --check on this checkout: nothing to move, nothing stale (a merged branch's old-style code fails here:
    # run scripts/regroup_floors.py)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "regroup_floors.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing to do" in done.stdout


def test_a_scratch_tree_is_fixed_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    # a tree already regrouped, with one new file written against the old layout (another branch's, merged)
    (tmp_path / "backend" / "runtime").mkdir(parents=True)
    for floor in ("runtime", "records", "app", "service"):
        (tmp_path / "backend" / floor).mkdir(parents=True, exist_ok=True)
        (tmp_path / "backend" / floor / "__init__.py").write_text('"""x"""\n')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["domainbench", "domainbench.store", "domainbench.query", "domainbench.runtime", '
        '"domainbench.records", "domainbench.app", "domainbench.service"]\n[project.scripts]\ndomainbench = "domainbench.app.cli:main"\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_text(OLD_STYLE)
    script = [sys.executable, str(ROOT / "scripts" / "regroup_floors.py"), "--root", str(tmp_path)]
    check = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 1 and check.stdout.split() == ["rewrite", "tests/test_new.py"]
    assert subprocess.run(script, capture_output=True, text=True, timeout=120).returncode == 0
    assert (tmp_path / "tests" / "test_new.py").read_text() == NEW_STYLE
    again = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert (tmp_path / "tests" / "test_new.py").read_text() == NEW_STYLE
