"""Parse and validate one LLM answer: JSON shape, catalogue names, parameter ranges, severities.

Every problem is collected (not just the first) and phrased so it can be sent back to the model
verbatim in the repair step. Only validated names ever leave this module, so text in the domain
description cannot smuggle anything outside the catalogue into a plan.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domainbench.records.config import Composition, CorruptionChoice
from domainbench.planner import compositions
from domainbench.planner.catalogue import Catalogue

MAX_ITEMS = 64
MAX_REASON_CHARS = compositions.MAX_REASON_CHARS

Severity = Annotated[int, Field(ge=1, le=5, strict=True)]


class PlanItem(BaseModel):
    """One entry of the model's answer (extra keys are tolerated and dropped)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=80)
    severities: list[Severity] = Field(min_length=1, max_length=5)
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _norm_name(cls, v: str) -> str:
        return v.strip()

    @field_validator("params", mode="before")
    @classmethod
    def _none_params(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("reason")
    @classmethod
    def _clip_reason(cls, v: str) -> str:
        return compositions.one_line(v, "reason", MAX_REASON_CHARS)


@dataclass
class Parsed:
    choices: list[CorruptionChoice] = field(default_factory=list)
    compositions: list[Composition] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # structural: JSON, names, params, severities

    @property
    def ok(self) -> bool:
        return not self.problems


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def _extract_json(raw: str) -> Any:
    text = raw.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        # Some models wrap the object in prose; take the outermost braces once.
        lo, hi = text.find("{"), text.rfind("}")
        if 0 <= lo < hi:
            try:
                return json.loads(text[lo : hi + 1])
            except json.JSONDecodeError:
                pass
        raise first


def parse_answer(raw: str | None, catalogue: Catalogue) -> Parsed:
    out = Parsed()
    if raw is None or not raw.strip():
        out.problems.append("the reply was empty; answer with the JSON object described in the output format")
        return out
    try:
        data = _extract_json(raw)
    except json.JSONDecodeError as e:
        out.problems.append(
            f"the reply is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            "answer with one JSON object only, no prose or markdown"
        )
        return out
    if isinstance(data, list):  # a bare list of items is accepted as the corruptions list
        data = {"corruptions": data}
    if not isinstance(data, dict) or not isinstance(data.get("corruptions"), list):
        out.problems.append('the JSON must be an object with a "corruptions" array')
        return out
    items = data["corruptions"]
    if len(items) > MAX_ITEMS:
        out.problems.append(f"{len(items)} corruptions listed; list each catalogue corruption at most once")
        return out
    seen: set[str] = set()
    for i, raw_item in enumerate(items):
        where = f"corruptions[{i}]"
        try:
            item = PlanItem.model_validate(raw_item)
        except ValidationError as e:
            out.problems += compositions.error_lines(where, e)
            continue
        name = item.name
        label = f"{where} ({name!r})"
        if name not in catalogue:
            lowered = name.lower().replace(" ", "_").replace("-", "_")
            if lowered in catalogue:
                out.problems.append(f"{label}: write the name exactly as listed: {lowered!r}")
            else:
                out.problems.append(
                    f"{label}: unknown corruption {name[:80]!r}{catalogue.suggest(name)}; "
                    "use only names from the catalogue"
                )
            continue
        if name in seen:
            out.problems.append(f"{label}: {name!r} is listed twice; list each corruption once")
            continue
        seen.add(name)
        params: dict[str, Any] = {}
        if item.params:
            try:
                catalogue.validate_params(name, item.params)
                params = dict(item.params)
            except ValueError as e:  # corruptions.CorruptionError names the parameter and its range
                out.problems.append(f"{label}: {e}")
                continue
        out.choices.append(CorruptionChoice(name=name, severities=list(item.severities), params=params, reason=item.reason))
    out.compositions, problems = compositions.parse(data.get("compositions"), catalogue)
    out.problems += problems
    return out
