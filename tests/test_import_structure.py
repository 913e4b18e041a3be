"""The packages' import graph: no cycles (module-level or inside functions, between modules or between
packages), imports only go down the floors, and corruptions/ is a leaf.

A cycle hidden in a function-level import still ties two modules together: neither can be
understood, tested or moved alone. So every ``import`` statement counts, wherever it is. Importing
``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``: those count as imports too (a records-floor
module importing ``models.label_sets`` ran ``models/__init__``, a floor above, and with it torch).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the checkout's folders and the module names they install as (pyproject's package-dir)
PACKAGES = {"backend": "domainbench", "corruptions": "domainbench.corruptions", "frontend": "domainbench.frontend"}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            name = ".".join((package, *path.relative_to(ROOT / folder).with_suffix("").parts))
            mods[name.removesuffix(".__init__")] = path
    return mods


def import_graph(parents: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports. With ``parents``, also every package ``__init__`` above an imported
    module that the import runs (those of the importer's own packages have run already: not counted)."""
    mods = _modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = owner(name)
                # a module importing its own package's __init__ is how Python loads it, not a cycle
                if target and target != mod and not (mod.startswith(target + ".") and mods[target].name == "__init__.py"):
                    graph[mod].add(target)
                if target and parents:
                    graph[mod] |= {p for p in _packages_above(target) if p in mods and not _within(mod, p)}
    return graph


def _packages_above(module: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``: the packages whose ``__init__`` importing it runs first."""
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    # pyproject lists the packages by hand (package-dir maps folders onto one namespace): a new
    # folder left out of that list would be missing from the wheel
    import tomllib

    # A folder of data files without an __init__ (prompts/planner) is a package to setuptools too: left out
    # of the list it still ships, with a 40-line warning on every build (`make install`, `make demo`)
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join((package, *path.parent.relative_to(ROOT / folder).parts))
        for folder, package in {**PACKAGES, "prompts": "domainbench.prompts"}.items()
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and (path.name == "__init__.py" or path.suffix != ".py")
    }
    assert found == listed


def test_nothing_imports_the_folders_by_their_checkout_names() -> None:
    # pytest puts the checkout on sys.path (for `tests.*`), so `import backend` or `files("prompts")`
    # would work here and fail in an installed wheel: the folders are only ever `domainbench.*`
    old = {"backend", "corruptions", "frontend", "prompts"}
    bad = []
    for folder in ("backend", "corruptions", "frontend", "prompts", "tests", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    if func in ("files", "import_module", "find_spec", "__import__") and isinstance(node.args[0].value, str):
                        names = [node.args[0].value]
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[0] in old]
    assert bad == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph(parents=True)) == []


def package_of(module: str) -> str:
    """The unit a package-level cycle is counted between: ``domainbench``'s direct child (a package such
    as ``domainbench.engine``, with everything below it, or a top-level module such as ``domainbench.records.config``)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto :func:`package_of`; imports inside one package are left out."""
    out: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        out.setdefault(package_of(mod), set())
        for t in targets:
            out.setdefault(package_of(t), set())
            if package_of(t) != package_of(mod):
                out[package_of(mod)].add(package_of(t))
    return out


def test_no_package_import_cycles() -> None:
    # engine <-> fmr was the last one (issue 35): the engine now reaches run kinds only through its registry
    # of kinds (engine.kinds), and fmr builds on the engine
    assert cycles(package_graph(import_graph(parents=True))) == []


def test_the_engine_imports_no_run_kind_but_its_own() -> None:
    # a kind is found by name in engine.kinds' registry; an import of fmr (or a later kind's package) from the
    # engine would tie the engine to that kind again
    graph = import_graph(parents=True)
    leaks = {m: sorted(t for t in ts if t.startswith("domainbench.fmr")) for m, ts in graph.items()
             if m.startswith("domainbench.engine")}
    assert {m: ts for m, ts in leaks.items() if ts} == {}


def test_the_built_in_run_kinds_are_modules_on_the_engine_floor() -> None:
    # the registry names its built-in kinds by module and the engine imports none of them: each must exist and
    # sit on the engine floor, so that loading a kind never runs an import up the floors
    from domainbench.engine.kinds import RUN_KINDS

    mods, engine = _modules(), [name for name, _ in LAYERS].index("engine")
    assert RUN_KINDS.builtins == ("domainbench.engine.corruption_kind", "domainbench.fmr.kind",
                                  "domainbench.engine.task_kind", "domainbench.engine.clip_kind")
    assert all(m in mods and layer_of(m) == engine for m in RUN_KINDS.builtins)


def test_the_package_cycle_finder_sees_packages_not_modules() -> None:
    # a.x -> b.y and b.z -> a.w: no module cycle, but the packages a and b need each other
    graph = {"domainbench.a.x": {"domainbench.b.y"}, "domainbench.b.z": {"domainbench.a.w"},
             "domainbench.b.y": set(), "domainbench.a.w": set(), "domainbench.c": {"domainbench.a.x"}}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["domainbench.a", "domainbench.b"]]


def test_corruptions_is_a_leaf_library() -> None:
    graph = import_graph()
    leaf = "domainbench.corruptions"
    leaks = {m: sorted(t for t in ts if not t.startswith(leaf)) for m, ts in graph.items() if m.startswith(leaf)}
    assert {m: ts for m, ts in leaks.items() if ts} == {}


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


#: the floors of the package, bottom up; a module may import its own floor or any floor below, never
#: one above ("imports only go down"). A module takes the floor of its longest listed prefix; a new
#: top-level module or package must be placed here (the test says so).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # plain helpers and leaf libraries: no domainbench import outside this floor
    # (runtime: the settings reader, user text and output files, resource bounds, watchdogs, crash reports, heartbeat)
    ("ground", ("domainbench", "domainbench.errors", "domainbench.runtime", "domainbench.stats", "domainbench.corruptions",
                "domainbench.data")),
    # plain typed data every floor above shares: configs, confusion counts, unit and summary results, the report, label
    # sets, the model backends as data, packed per-image arrays (records/: importing it loads no torch)
    ("records", ("domainbench.records",)),
    # the store: documents, repositories, the queue; nothing from metrics, models, engine or FMR
    ("store", ("domainbench.store",)),
    # what computes from images and records
    ("compute", ("domainbench.models", "domainbench.metrics", "domainbench.planner")),
    # what runs: the engine, its executors, FMR's search
    ("engine", ("domainbench.engine", "domainbench.fmr", "domainbench.tuning")),
    # reading results: the one API show, export, compare and the UI read runs and reports through (query/__init__), and
    # the read side below it (exports, comparisons, intervals, per-image predictions, the gate)
    ("query", ("domainbench.query",)),
    # what changes runs on a user's behalf, checked: launching into the queue, cancel, requeue, delete, save a plan
    # (the UI's writes; the frontend reaches the store through here and through query only)
    ("service", ("domainbench.service",)),
    # what people and machines start: the CLI and the queue's worker (app/), the UI, the Python API (`import
    # domainbench`'s functions, on the code the CLI runs)
    ("entry", ("domainbench.app", "domainbench.api", "domainbench.frontend")),
]

#: the one import allowed up the floors: the root package lends the Python API's names, importing
#: ``domainbench.api`` only inside its PEP 562 ``__getattr__`` (checked below: its top level imports nothing of
#: the package, and ``import domainbench`` loads neither the API nor torch)
FRONT_DOOR = {("domainbench", "domainbench.api")}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, floor)
    for floor, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            # the root package's floor is its __init__ alone, so a new top-level module must be placed
            inside = module.startswith(p + ".") and p != "domainbench"
            if (module == p or inside) and (best is None or len(p) > best[0]):
                best = (len(p), floor)
    return None if best is None else best[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's, as 'a (floor) -> b (floor)'."""
    names = [name for name, _ in LAYERS]
    found = []
    for mod in sorted(graph):
        for target in sorted(graph[mod]):
            if (mod, target) in FRONT_DOOR:
                continue
            lo, hi = layer_of(mod), layer_of(target)
            if lo is not None and hi is not None and hi > lo:
                found.append(f"{mod} ({names[lo]}) -> {target} ({names[hi]})")
    return found


def test_every_module_has_a_floor() -> None:
    assert [m for m in import_graph() if layer_of(m) is None] == []


def test_imports_only_go_down() -> None:
    assert upward_imports(import_graph(parents=True)) == []


def test_an_import_runs_the_packages_above_it() -> None:
    # config (records) importing a module inside models/ runs models/__init__ (compute): the floor checker
    # must see that edge, while a module's own package __init__ is no new import
    graph = import_graph(parents=True)
    assert "domainbench.metrics" in graph["domainbench.engine.reports"]  # it imports domainbench.metrics.run_report
    assert "domainbench.engine" not in graph["domainbench.engine.reports"]
    assert _packages_above("domainbench.models.label_sets") == ["domainbench", "domainbench.models"]
    assert upward_imports({"domainbench.records.config": {"domainbench.models"}}) == [
        "domainbench.records.config (records) -> domainbench.models (compute)"]


def test_the_floor_checker_sees_an_upward_import() -> None:
    graph = {"domainbench.store.records": {"domainbench.metrics.aggregate"}, "domainbench.metrics.aggregate": set(),
             "domainbench.app.cli": {"domainbench.store"}, "domainbench.store": set()}
    assert upward_imports(graph) == ["domainbench.store.records (store) -> domainbench.metrics.aggregate (compute)"]
    assert layer_of("domainbench.metrics.defs.fmr") == 3 and layer_of("domainbench.records.report") == 1
    assert layer_of("domainbench.reporting") is None  # a prefix is a whole name, not the start of one


def store_imports_of(graph: dict[str, set[str]], package: str = "domainbench.frontend") -> dict[str, list[str]]:
    """The modules of ``package`` that import the store (or run its ``__init__``), with what they import of it."""
    found = {m: sorted(t for t in ts if _within(t, "domainbench.store")) for m, ts in graph.items() if _within(m, package)}
    return {m: ts for m, ts in found.items() if ts}


def test_the_frontend_imports_nothing_of_the_store() -> None:
    # the UI reads through domainbench.query and writes through domainbench.service: a change of how runs are
    # stored, queued or removed is made below those, never in a page
    assert store_imports_of(import_graph(parents=True)) == {}


def test_the_store_import_finder_sees_one() -> None:
    graph = {"domainbench.frontend.views.runs": {"domainbench.store.records"}, "domainbench.frontend.data": {"domainbench.query"},
             "domainbench.store.records": set(), "domainbench.query": {"domainbench.store"}}
    assert store_imports_of(graph) == {"domainbench.frontend.views.runs": ["domainbench.store.records"]}


def test_the_records_import_no_model_stack() -> None:
    # a run config, a stored record and the models package's plain parts are data: building them in a
    # fresh interpreter loads neither torch nor the hub libraries (listing runs paid 4 s for that)
    import subprocess
    import sys

    code = ("import sys, domainbench.records.config, domainbench.store.records, domainbench.models, domainbench.records.label_sets\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'open_clip', 'transformers', 'cv2'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_root_package_imports_the_api_only_when_a_name_is_read() -> None:
    # the FRONT_DOOR exception holds only while the root's top level imports nothing of the package
    tree = ast.parse((ROOT / "backend" / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in top if "domainbench" in ast.unparse(n)] == []
    code = ("import sys, domainbench; assert 'domainbench.api' not in sys.modules and 'torch' not in sys.modules; "
            "assert callable(domainbench.run) and 'domainbench.api' in sys.modules")
    import subprocess
    import sys

    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True).returncode == 0


def floor_table(text: str) -> list[tuple[str, set[str]]]:
    """docs/architecture.md's floor table, top floor first: (floor, the modules in backticks, as installed names)."""
    rows = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.replace(" ", "").startswith("|floor|modules|"):
            break
    next(lines)  # the |---| line
    for line in lines:
        if not line.startswith("|"):
            break
        floor, modules = (cell.strip() for cell in line.strip("|").split("|")[:2])
        names = modules.split("`")[1::2]
        rows.append((floor, {n if n == "domainbench" or n.startswith("domainbench.") else f"domainbench.{n}" for n in names}))
    return rows


def test_the_architecture_floor_table_is_layers() -> None:
    # the table is read by people, LAYERS by this test: one must not drift from the other
    table = floor_table((ROOT / "docs" / "architecture.md").read_text())
    assert [floor for floor, _ in table] == [name for name, _ in reversed(LAYERS)]
    assert {floor: sorted(mods) for floor, mods in table} == {name: sorted(prefixes) for name, prefixes in LAYERS}


def test_the_floor_table_reader_sees_a_difference() -> None:
    text = "x\n| floor | modules | what |\n|---|---|---|\n| entry | `app`, `api` | a |\n| ground | `domainbench`, `errors` | b |\n\nafter"
    assert floor_table(text) == [("entry", {"domainbench.app", "domainbench.api"}),
                                 ("ground", {"domainbench", "domainbench.errors"})]
