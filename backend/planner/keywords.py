"""The planner data files' keyword syntax and loader, shared by the sanity rules, the cues and the
acquisition factors: case-insensitive whole words, a trailing ``*`` for any ending, spaces and hyphens
in a keyword matching a space, a hyphen or nothing."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from domainbench.errors import UserInputError


def _keyword_regex(keyword: str) -> str:
    kw = keyword.strip().lower()
    star = kw.endswith("*")
    kw = kw.rstrip("*")
    parts = [re.escape(p) for p in re.split(r"[\s\-]+", kw) if p]
    body = r"[\s\-]?".join(parts)
    return r"(?<!\w)" + body + (r"\w*" if star else r"(?!\w)")


M = TypeVar("M", bound=BaseModel)


def load_book(path: Path, model: type[M], what: str, shipped: str) -> tuple[M, bytes]:
    """A planner data file validated by ``model``, and its raw bytes (for a content fingerprint)."""
    try:
        raw = path.read_bytes()
        return model.model_validate(tomllib.loads(raw.decode("utf-8"))), raw
    except FileNotFoundError as e:
        raise UserInputError(f"{what} file {path} is missing; restore {shipped}") from e
    except (tomllib.TOMLDecodeError, ValidationError) as e:
        raise UserInputError(f"{what} file {path} is invalid ({e}); fix it") from e


def keyword_pattern(keywords: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(_keyword_regex(k) for k in keywords), re.IGNORECASE)


