"""The planner's view of the corruption registry: names, descriptions, situations, schemas.

The registry (``corruptions``) is the single source of truth; this module only reshapes its
``catalogue()`` entries into a typed snapshot the prompt renderer, the validator and the offline
ranker share, and gives close-name suggestions for unknown names.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from domainbench.errors import UserInputError


class CatalogueEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    family: str
    description: str
    situations: list[str]
    parameters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ordinal: bool = True
    #: a corruption of video clips (state across frames): proposed only for footage
    temporal: bool = False


class Catalogue(BaseModel):
    """An immutable snapshot of the registry, in registry order."""

    model_config = ConfigDict(frozen=True)

    entries: list[CatalogueEntry]

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def __contains__(self, name: object) -> bool:
        return name in self.by_name()

    def by_name(self) -> dict[str, CatalogueEntry]:
        return {e.name: e for e in self.entries}

    @property
    def temporal_names(self) -> list[str]:
        return [e.name for e in self.entries if e.temporal]

    def still(self) -> Catalogue:
        """The image corruptions only (what a still photograph can show)."""
        return Catalogue(entries=[e for e in self.entries if not e.temporal])

    def fingerprint(self) -> str:
        """Content hash: changes whenever a name, description, situation or schema changes."""
        # an image corruption's entry hashes as before the temporal flag existed (cached embeddings stay valid)
        dumps = [e.model_dump(exclude=None if e.temporal else {"temporal"}) for e in self.entries]
        blob = json.dumps(dumps, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.6)
        return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""

    def validate_params(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Validated parameters (registry semantics); raises ``corruptions.CorruptionError``."""
        from domainbench import corruptions
        return dict(corruptions.validate_params(name, dict(params)))


def load_catalogue() -> Catalogue:
    """Snapshot of the live registry (cheap: reads metadata only, no kernels run)."""
    try:
        from domainbench import corruptions
    except ImportError as e:  # pragma: no cover - the package ships with domainbench
        raise UserInputError(f"the corruption library could not be imported ({e}); reinstall domainbench") from e
    entries = [CatalogueEntry.model_validate(d) for d in corruptions.catalogue()]
    if not entries:
        raise UserInputError("the corruption catalogue is empty; the planner has nothing to choose from")
    return Catalogue(entries=entries)
