"""Prompt templates: loaded from the ``prompts`` package's ``planner/`` files, rendered with ``$name``.

No prompt wording lives in this module; it only fills placeholders. ``string.Template`` is used
(not ``str.format``) so JSON braces in the templates need no escaping. The prompt version is a
content hash of every template file, so any wording change yields a new version in provenance.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template
from typing import Any

from domainbench.errors import UserInputError
from domainbench.planner.catalogue import Catalogue, CatalogueEntry

TEMPLATE_FILES = (
    "system.txt",
    "user.txt",
    "catalogue_entry.txt",
    "output_format.txt",
    "output_schema.json",
    "repair.txt",
    "truncation_note.txt",
)
# Delimiters around the user's text in user.txt; removed from the text so it cannot close them.
DOMAIN_MARKERS = ("<<<DOMAIN", "DOMAIN>>>")


#: the package whose ``planner/`` folder holds the shipped templates
PROMPTS_PACKAGE = "domainbench.prompts"


def _override() -> str | None:
    from domainbench.runtime.settings import Settings

    folder = Settings.from_env().prompts_dir
    return str(folder) if folder else None


def _templates_dir(override: str | None) -> Traversable:
    base: Traversable = Path(override) if override else files(PROMPTS_PACKAGE)
    return base / "planner"


def prompts_dir() -> Traversable:
    """``$DOMAINBENCH_PROMPTS_DIR/planner`` or the installed ``prompts`` package's ``planner/``."""
    return _templates_dir(_override())


# keyed by the override (None: the package) rather than the folder: not every Traversable hashes
@lru_cache(maxsize=4)
def _load(override: str | None) -> dict[str, str]:
    d = _templates_dir(override)
    missing = [f for f in TEMPLATE_FILES if not (d / f).is_file()]
    if missing:
        raise UserInputError(
            f"prompt templates {', '.join(missing)} are missing from {d}; "
            "restore them or point DOMAINBENCH_PROMPTS_DIR at a folder holding planner/*.txt"
        )
    return {f: (d / f).read_text(encoding="utf-8") for f in TEMPLATE_FILES}


def templates() -> dict[str, str]:
    return _load(_override())


def prompt_version() -> str:
    h = hashlib.sha256()
    for name, text in sorted(templates().items()):
        h.update(name.encode())
        h.update(b"\0")
        h.update(text.encode())
        h.update(b"\0")
    return "planner-" + h.hexdigest()[:12]


def output_schema() -> dict[str, Any]:
    return json.loads(templates()["output_schema.json"])


def _render(template: str, **values: str) -> str:
    try:
        return Template(templates()[template]).substitute(**values)
    except (KeyError, ValueError) as e:
        raise UserInputError(f"prompt template {template} has an unknown or malformed placeholder ({e}); fix the file") from e


def _fmt_num(v: Any) -> str:
    return "-inf" if v is None else f"{v:g}" if isinstance(v, (int, float)) else str(v)


def _render_parameters(entry: CatalogueEntry) -> str:
    if not entry.parameters:
        return "none"
    parts = []
    for key, spec in entry.parameters.items():
        lo, hi = spec.get("min"), spec.get("max")
        bounds = f" in [{_fmt_num(lo)}, {_fmt_num(hi)}]" if lo is not None or hi is not None else ""
        default = spec.get("default")
        dflt = f", default {_fmt_num(default)}" if default is not None else ""
        parts.append(f"{key} ({spec.get('type', 'value')}{bounds}{dflt})")
    return "; ".join(parts)


def render_catalogue(catalogue: Catalogue) -> str:
    lines = []
    for e in catalogue.entries:
        lines.append(
            _render(
                "catalogue_entry.txt",
                name=e.name,
                family=f"{e.family}, temporal: video clips only" if e.temporal else e.family,
                description=e.description.strip(),
                situations="; ".join(s.strip() for s in e.situations),
                parameters=_render_parameters(e),
            ).rstrip("\n")
        )
    return "\n".join(lines)


def sanitize_domain(text: str) -> str:
    for marker in DOMAIN_MARKERS:
        text = text.replace(marker, "")
    return text


def system_message() -> str:
    return templates()["system.txt"].strip()


def user_message(domain_text: str, catalogue: Catalogue) -> str:
    fmt = _render("output_format.txt", schema=json.dumps(output_schema(), indent=2))
    return _render(
        "user.txt",
        domain=sanitize_domain(domain_text),
        catalogue=render_catalogue(catalogue),
        output_format=fmt.strip(),
    ).strip()


def repair_message(problems: list[str]) -> str:
    return _render("repair.txt", problems="\n".join(f"- {p}" for p in problems)).strip()


def truncation_note(kept: int, total: int) -> str:
    return _render("truncation_note.txt", kept=str(kept), total=str(total)).strip()


def messages(domain_text: str, catalogue: Catalogue) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_message()},
        {"role": "user", "content": user_message(domain_text, catalogue)},
    ]
