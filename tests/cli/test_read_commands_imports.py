"""Read commands answer without the model stack: `ls`, `show`, `export`, `compare`, `check`, `report --format md`,
`rm`, `metrics` and `--help` import neither torch, open_clip nor transformers (issue 43: listing runs took 4.3 s
and 806 MB because it imported them).

The commands run in one fresh interpreter, one after another through the real entry point, on a small
store of the UI benchmark's shape; after each, the wrapper records which of the heavy packages
``sys.modules`` holds. Modules only accumulate, so a command that pulled torch in is the first one
whose line names it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.ui_render import fill

#: the model stack: a read command that needs no pixels loads none of it
MODEL_STACK = ("torch", "open_clip", "transformers")
#: imported where a computation needs them, never by reading a stored run: scipy as a whole (scipy.special alone took
#: 0.5-0.7 s: the paired tests' normal and binomial kernels now come from the standard library, stats.kernels;
#: scipy.stats ~1 s, scipy.sparse for the breaking point's intervals), pydantic-settings and the asyncio it imports
#: (the settings are read by hand), and the plotting, image and data-frame libraries of the UI and the corruptions
LAZY = ("scipy", "scipy.special", "scipy.stats", "scipy.sparse", "scipy.optimize", "scipy.ndimage", "pydantic_settings",
        "asyncio", "pandas", "plotly", "numba", "cv2", "sklearn", "streamlit", "ray")

#: runs each command (argv lists, JSON on stdin) through domainbench.app.cli.main in this one process
WRAPPER = r"""
import json, sys
from domainbench.app.cli import main

stack = tuple(sys.argv[1].split(","))
lazy = tuple(sys.argv[2].split(","))
report = []
for argv in json.load(sys.stdin):
    sys.argv = ["domainbench", *argv]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(stack))
    report.append({"argv": argv, "code": code, "stack": loaded, "query_loaded": "domainbench.query" in sys.modules,
                   "lazy": sorted(m for m in lazy if m in sys.modules)})
sys.stdout.flush()
sys.stderr.write("\nREPORT " + json.dumps(report) + "\n")
"""


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    home = tmp_path_factory.mktemp("read-store")
    return home, fill(home, 3, 3 * 2 * 11, running=1)  # 3 runs (the last running), one shard per cell


def _run(home: Path, commands: list[list[str]]) -> list[dict]:
    env = {**os.environ, "DOMAINBENCH_HOME": str(home)}
    env.pop("DOMAINBENCH_MONGO_URI", None)
    done = subprocess.run([sys.executable, "-c", WRAPPER, ",".join(MODEL_STACK), ",".join(LAZY)], input=json.dumps(commands),
                          capture_output=True, text=True, env=env, timeout=300)
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("REPORT ")), None)
    assert line is not None, done.stderr[-3000:]
    return json.loads(line.removeprefix("REPORT "))


def test_read_commands_load_no_model_stack(bench_store: tuple[Path, list[str]], tmp_path: Path) -> None:
    home, (a, b, running) = bench_store
    commands = [
        ["--help"], ["ls", "--help"], ["metrics"], ["--quiet", "ls"],
        ["show", a], ["export", a], ["export", a, "-f", "json"], ["export", a, "--predictions"],
        ["export", a, "--predictions", "-f", "json", "-o", str(tmp_path / "p.json")],
        ["compare", a, b], ["compare", a, b, "-f", "json"],
        ["check", a, "-r", "mce <= 100"], ["report", a, "-f", "md", "-o", str(tmp_path / "r.md")],
        ["--quiet", "rm", b],
    ]
    report = _run(home, commands)
    assert [r["argv"] for r in report] == commands
    assert [(r["argv"], r["code"]) for r in report] == [(c, 0) for c in commands]
    assert [(r["argv"], r["stack"]) for r in report] == [(c, []) for c in commands]
    assert [(r["argv"], r["lazy"]) for r in report] == [(c, []) for c in commands]
    # the commands did read the store (the wrapper saw query's modules load): the check above saw real work
    assert report[3]["query_loaded"] is False and report[4]["query_loaded"] is True
    assert (tmp_path / "p.json").stat().st_size > 0


def test_the_wrapper_sees_the_model_stack_when_a_command_loads_it(bench_store: tuple[Path, list[str]]) -> None:
    # `models` lists the registered backends, which imports the embedded models' torch modules: the
    # same wrapper must name torch there, or the test above could pass without looking
    home, _ = bench_store
    report = _run(home, [["metrics"], ["models", "embedded:*"]])
    assert report[0]["stack"] == [] and "torch" in report[1]["stack"]


def test_the_wrapper_sees_a_lazy_module_when_one_is_imported(bench_store: tuple[Path, list[str]]) -> None:
    # the wrapper's own check of the lazy list: a module imported before a command shows in that command's line
    home, (a, _, _) = bench_store
    import subprocess as sp

    env = {**os.environ, "DOMAINBENCH_HOME": str(home)}
    env.pop("DOMAINBENCH_MONGO_URI", None)
    wrapper = "import scipy.stats\n" + WRAPPER
    done = sp.run([sys.executable, "-c", wrapper, ",".join(MODEL_STACK), ",".join(LAZY)], input=json.dumps([["metrics"]]),
                  capture_output=True, text=True, env=env, timeout=300)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("REPORT "))
    assert "scipy.stats" in json.loads(line.removeprefix("REPORT "))[0]["lazy"]
