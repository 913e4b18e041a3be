"""Group the package's flat top level into folders that are its floors (issue 35, item 4), and rewrite every
reference to a moved module.

    .venv/bin/python scripts/regroup_floors.py            # move (git mv) what is still at its old place, rewrite
    .venv/bin/python scripts/regroup_floors.py --check    # say what it would change; exit 1 if anything

Idempotent: on a tree already regrouped it moves nothing and rewrites only what still names the old layout,
such as code written on another branch against it and merged afterwards. That is how such code is fixed after
a merge: run it again, then the import test (``tests/test_import_structure.py``).

What it rewrites, in backend/, corruptions/, frontend/, prompts/, tests/, benchmarks/, scripts/, docs/, .ci/,
README.md, pyproject.toml, the Makefile, the Dockerfile and docker-compose.yml:

- dotted names: ``domainbench.config`` -> ``domainbench.records.config`` wherever it stands (imports,
  ``mock.patch`` and ``monkeypatch`` strings, ``import_module``, entry points such as ``domainbench.cli:main``,
  docs), ``domainbench.engine.export.cell_rows`` -> ``domainbench.query.export.cell_rows``;
- ``from domainbench import cli, api`` -> ``from domainbench.app import cli`` + ``from domainbench import api``
  (split when only some of the names moved; parenthesised and ``as`` forms too);
- relative imports (``from .config import X``, ``from ..engine import export``) whose target moved, made
  absolute; those of a file the script moves are all made absolute (its package changes);
- a sub-package's moved module cited without ``domainbench.``: ``engine.export`` -> ``query.export``;
- checkout paths: ``backend/config.py`` -> ``backend/records/config.py``, ``engine/export.py`` -> ``query/export.py``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: where each floor's folder goes, and what its ``__init__`` says
FLOORS = {
    "runtime": '"""The process\'s runtime (ground floor): the settings reader, user text and whole-or-nothing output files,\n'
               'resource bounds, free disk and host memory, the parent watch, crash reports and the workers\' heartbeat.\n'
               'Nothing of the package above ``domainbench.errors`` is imported here."""\n',
    "records": '"""Plain typed data every floor above shares (records floor): run and domain configs, unit documents and\n'
               'summaries, the report, confusion counts, mergeable unit sums, label sets, the model backends as data,\n'
               'packed per-image arrays. Importing any of it loads no torch (tested)."""\n',
    "app": '"""What people and machines start (entry floor): the CLI (``app.cli``, the ``domainbench`` command) and the\n'
           'queue\'s worker (``app.worker``). The Python API is ``domainbench.api``; the UI is ``domainbench.frontend``."""\n',
    "service": '"""What changes runs on a user\'s behalf: checked launches into the queue (``launch``), and the UI\'s other\n'
               'writes (``runs``: open the store, save a planned domain, cancel, requeue, delete). The frontend writes\n'
               'through here and reads through ``domainbench.query``, never through the store\'s modules."""\n',
}

#: old installed module name -> new (only modules whose name changes; query.py keeps its name as query/__init__)
MOVES: dict[str, str] = {
    **{f"domainbench.{m}": f"domainbench.runtime.{m}" for m in (
        "settings", "literal", "safe_output", "resource_bounds", "disk_full", "host_memory", "parent_watch",
        "crash_report", "heartbeat")},
    **{f"domainbench.{m}": f"domainbench.records.{m}" for m in (
        "config", "results", "confusion", "report", "unit_sums", "label_sets", "model_backends", "drawn_params",
        "packed")},
    **{f"domainbench.engine.{m}": f"domainbench.query.{m}" for m in (
        "export", "compare", "confidence", "predictions", "regression", "gate", "hard", "task_output")},
    "domainbench.launch": "domainbench.service.launch",
    **{f"domainbench.{m}": f"domainbench.app.{m}" for m in ("cli", "worker")},
}

#: the checkout's folders and the package each installs as (pyproject's package-dir)
FOLDERS = {"backend": "domainbench", "corruptions": "domainbench.corruptions", "frontend": "domainbench.frontend",
           "prompts": "domainbench.prompts"}

#: files moved whose module name stays (a module becoming its package's __init__)
FILE_MOVES = {"backend/query.py": "backend/query/__init__.py"}

SCANNED_DIRS = ("backend", "corruptions", "frontend", "prompts", "tests", "benchmarks", "scripts", "docs", ".ci")
SCANNED_FILES = ("README.md", "pyproject.toml", "Makefile", "Dockerfile", "docker-compose.yml")
SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".ini", ".sh", ".rst", ""}
#: this script and its test name the old layout on purpose
EXCLUDED = {"scripts/regroup_floors.py", "tests/test_regroup_floors.py"}


def path_of(module: str) -> str:
    """``domainbench.records.config`` -> ``backend/records/config.py`` (a module, not a package)."""
    for folder, package in sorted(FOLDERS.items(), key=lambda kv: -len(kv[1])):
        if module == package or module.startswith(package + "."):
            rest = module[len(package):].lstrip(".").split(".")
            return "/".join([folder, *rest]) + ".py"
    raise ValueError(module)


def file_moves() -> dict[str, str]:
    """Every file the regrouping moves: old checkout path -> new."""
    # query.py becomes query/__init__.py before engine's read side moves into query/ beside it
    return {**FILE_MOVES, **{path_of(old): path_of(new) for old, new in MOVES.items()}}


# --------------------------------------------------------------------------- rewriting text

_OLD_NAMES = sorted(MOVES, key=len, reverse=True)
_DOTTED = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in _OLD_NAMES) + r")(?!\w)")


def _path_rules() -> list[tuple[re.Pattern[str], str]]:
    rules = []
    for old, new in file_moves().items():
        # backend/config.py; and, without the checkout folder, engine/export.py (the way docs and comments cite them)
        rules.append((re.compile(r"(?<![\w./-])" + re.escape(old) + r"(?![\w/])"), new))
        # and the same path joined with pathlib: ROOT / "backend" / "settings.py"
        join = r"([\"'])" + r"\1[ \t]*/[ \t]*\1".join(re.escape(part) for part in old.split("/")) + r"\1"
        rules.append((re.compile(join), "\\1" + "\\1 / \\1".join(new.split("/")) + "\\1"))
        o_short, n_short = old.split("/", 1)[1], new.split("/", 1)[1]
        if "/" in o_short:
            rules.append((re.compile(r"(?<![\w./-])" + re.escape(o_short) + r"(?![\w/])"), n_short))
    return rules


_PATHS = _path_rules()

#: a moved module of a sub-package cited without the package's name, as docs and comments do (``engine.export``);
#: a bare top-level name (``config``) is too common a word to rewrite
_SHORT = {old.removeprefix("domainbench."): new.removeprefix("domainbench.") for old, new in MOVES.items()
          if old.count(".") >= 2}
_SHORT_DOTTED = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(_SHORT, key=len, reverse=True))
                           + r")(?![\w])")

_NAME = r"\w+(?:[ \t]+as[ \t]+\w+)?"
_NAMES = rf"{_NAME}(?:[ \t]*,[ \t]*{_NAME})*"
#: ``from BASE import NAMES`` / ``from BASE import (NAMES)``, at a line's start or inside a line (a code string)
_FROM = re.compile(
    rf"(?P<lead>^[ \t]*|(?<=[;\"'])[ \t]*)from[ \t]+(?P<base>\.+[\w.]*|domainbench(?:\.\w+)*)[ \t]+import[ \t]+"
    rf"(?P<names>\((?:[^()]*)\)|{_NAMES})(?P<tail>[ \t]*,)?",
    re.M,
)


def _absolute(base: str, package: str | None) -> str | None:
    """``..engine`` seen from ``domainbench.frontend.views`` -> ``domainbench.engine``; None without a package."""
    level = len(base) - len(base.lstrip("."))
    if not level:
        return base
    if package is None:
        return None
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        return None
    kept = parts[: len(parts) - level + 1]
    rest = base[level:]
    return ".".join(kept + ([rest] if rest else []))


def _split_names(names: str) -> list[tuple[str, str]]:
    """``(a, b as c,  # note\\n d)`` -> [(a, "a"), (b, "b as c"), (d, "d")]."""
    body = names.strip()
    if body.startswith("("):
        body = "\n".join(line.split("#", 1)[0] for line in body[1:-1].splitlines())
    out = []
    for item in body.split(","):
        item = " ".join(item.split())
        if item:
            out.append((item.split(" ")[0], item))
    return out


def _rewrite_from(m: re.Match[str], package: str | None, moved_file: bool) -> str:
    base, names = m.group("base"), m.group("names")
    if m.group("tail"):  # a trailing comma after unparenthesised names: not an import statement we understand
        return m.group(0)
    absolute = _absolute(base, package)
    if absolute is None:
        return m.group(0)
    relative = base.startswith(".")
    new_base = _DOTTED.sub(lambda d: MOVES[d.group(1)], absolute)
    items = _split_names(names)
    groups: dict[str, list[str]] = {}
    for name, text in items:
        target = MOVES.get(f"{new_base}.{name}") or MOVES.get(f"{absolute}.{name}")
        parent = target.rpartition(".")[0] if target else new_base
        groups.setdefault(parent, []).append(text)
    changed = new_base != absolute or len(groups) > 1 or new_base not in groups
    if not changed and not (relative and moved_file):
        return m.group(0)
    if not changed and relative:  # a moved file's relative import: its package changes, make it absolute
        return m.group(0).replace(base, absolute, 1)
    lead = m.group("lead")
    line_start = m.start() == 0 or m.string[m.start() - 1] == "\n"
    joiner = "\n" + lead if line_start and lead.strip() == "" else "; "
    stmts = []
    for parent, texts in groups.items():
        if names.strip().startswith("(") and len(", ".join(texts)) > 80:
            body = "(\n" + "".join(f"{lead}    {t},\n" for t in texts) + f"{lead})"
        else:
            body = ", ".join(texts)
        stmts.append(f"from {parent} import {body}")
    return lead + joiner.join(stmts)


def rewrite(text: str, package: str | None = None, moved_file: bool = False) -> str:
    """``text`` with every reference to a module of the old layout turned into its new name.

    ``package`` is the installed package a Python file lives in (for its relative imports); ``moved_file`` says
    the file itself is being moved, so its relative imports are all made absolute. Running it on its own output
    changes nothing."""
    text = _FROM.sub(lambda m: _rewrite_from(m, package, moved_file), text)
    text = _DOTTED.sub(lambda d: MOVES[d.group(1)], text)
    text = _SHORT_DOTTED.sub(lambda d: _SHORT[d.group(1)], text)
    for pattern, new in _PATHS:
        text = pattern.sub(new, text)
    return text


# --------------------------------------------------------------------------- the tree


def package_of(relpath: str) -> str | None:
    """The installed package of a checkout file (``frontend/views/runs.py`` -> ``domainbench.frontend.views``)."""
    parts = relpath.split("/")
    if parts[0] not in FOLDERS or not relpath.endswith(".py"):
        return None
    return ".".join([FOLDERS[parts[0]], *parts[1:-1]])


def scanned(root: Path) -> list[Path]:
    files = [root / f for f in SCANNED_FILES if (root / f).is_file()]
    for d in SCANNED_DIRS:
        if (root / d).is_dir():
            files += [p for p in (root / d).rglob("*") if p.is_file() and p.suffix in SUFFIXES
                      and "__pycache__" not in p.parts and p.name != ".DS_Store"]
    return sorted(f for f in files if f.relative_to(root).as_posix() not in EXCLUDED)


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)


def move_files(root: Path, dry_run: bool) -> list[str]:
    """git mv every file still at its old place, creating the floors' packages; what was (or would be) done."""
    done = []
    for floor, doc in FLOORS.items():
        init = root / "backend" / floor / "__init__.py"
        if not init.exists():
            done.append(f"create {init.relative_to(root)}")
            if not dry_run:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(doc)
                _git(root, "add", str(init.relative_to(root)))
    for old, new in file_moves().items():
        src, dst = root / old, root / new
        if not src.exists():
            continue
        if dst.exists():
            raise SystemExit(f"error: both {old} and {new} exist: merge {old} into {new} by hand, delete it, and run again")
        done.append(f"git mv {old} {new}")
        if not dry_run:
            dst.parent.mkdir(parents=True, exist_ok=True)
            _git(root, "mv", old, new)
    return done


def rewrite_tree(root: Path, dry_run: bool, moved: dict[str, str] | None = None) -> list[str]:
    """Rewrite every scanned file; the files changed. ``moved``: new path -> old path of the files just moved
    (their relative imports are read in their old package)."""
    moved = moved or {}
    changed = []
    for path in scanned(root):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        old_rel = moved.get(rel, rel)
        new = rewrite(text, package_of(old_rel), moved_file=rel in moved)
        if new != text:
            changed.append(rel)
            if not dry_run:
                path.write_text(new, encoding="utf-8")
    changed += update_pyproject(root, dry_run)
    return changed


def update_pyproject(root: Path, dry_run: bool) -> list[str]:
    """List the floors' packages in pyproject's explicit ``packages`` (else the wheel misses them)."""
    path = root / "pyproject.toml"
    text = path.read_text()
    listed = tomllib.loads(text)["tool"]["setuptools"]["packages"]
    missing = [f"domainbench.{f}" for f in ("query", *FLOORS) if f"domainbench.{f}" not in listed]
    if not missing:
        return []
    anchor = '"domainbench.store", '
    if anchor not in text:
        raise SystemExit("error: pyproject.toml's packages list has no \"domainbench.store\": add "
                         + ", ".join(missing) + " to it by hand")
    if not dry_run:
        path.write_text(text.replace(anchor, anchor + "".join(f'"{m}", ' for m in missing), 1))
    return ["pyproject.toml"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list what would change, exit 1 if anything")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this script's)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    moves = move_files(root, args.check)
    moved = {new: old for old, new in file_moves().items() if (root / new).exists() and f"git mv {old} {new}" in moves}
    if args.check:
        # what moving would change is read from the files at their old places
        changed = rewrite_tree(root, dry_run=True)
    else:
        changed = rewrite_tree(root, dry_run=False, moved=moved)
    for line in moves + [f"rewrite {c}" for c in changed]:
        print(line)
    if not moves and not changed:
        print("nothing to do: the tree is regrouped and names no old module")
    return 1 if args.check and (moves or changed) else 0


if __name__ == "__main__":
    sys.exit(main())
