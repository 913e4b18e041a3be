"""The FMR knobs of a run, stored with the run so a resumed run searches exactly the same way."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Search = Literal["greedy", "gradient"]


class FmrSettings(BaseModel):
    """Oracle zoo, search kind and its budget; the seed is the run config's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    oracle: list[str]
    search: Search = "greedy"
    #: accepted perturbation steps at most per image (the paper's B)
    budget: int = Field(default=10, ge=0)
    #: candidate perturbations scored per step (greedy search)
    candidates: int = Field(default=4, ge=1)
    #: how far one step moves a parameter, as a fraction of its range
    step_size: float = Field(default=0.2, gt=0.0, le=1.0)
    #: images per stored unit; None: as many as keep the unit's PNG payloads under 8 MB
    #: (MongoDB refuses documents over 16 MB), at most 50
    shard_size: int | None = Field(default=None, ge=1)

    @field_validator("oracle")
    @classmethod
    def _listed_once(cls, v: list[str]) -> list[str]:
        dupes = sorted({m for m in v if v.count(m) > 1})
        if dupes:
            raise ValueError(f"oracle model listed twice: {', '.join(dupes)}")
        return v
