"""Self-consistency: combine N sampled plans by majority vote (product paper, Section 4.1).

- A corruption is chosen when it appears in more than half of the valid samples.
- Its frequency (share of valid samples that chose it) is kept for every catalogue entry,
  chosen or not: the UI draws it as the paper's selection heatmap.
- Severities: a level is kept when more than half of the samples that chose the corruption
  proposed it; if no level has such support, the median proposed level (lower median) is used.
- Explicit parameters are kept only when more than half of those samples gave the same ones.
- The reason is taken from the first sample whose severities equal the voted ones (else the
  first sample that chose it), so the stored reason matches the stored severities when possible.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from domainbench.records.config import Composition, CorruptionChoice


@dataclass
class VoteResult:
    chosen: list[CorruptionChoice]
    frequencies: dict[str, float]
    n_samples: int
    #: composed corruptions the planner proposes (``planner.compositions``); a provider may leave them out
    compositions: list[Composition] = field(default_factory=list)


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def majority_vote(samples: Sequence[Sequence[CorruptionChoice]], catalogue_names: Sequence[str]) -> VoteResult:
    n = len(samples)
    if n == 0:
        raise ValueError("majority_vote needs at least one valid sample")
    per_name: dict[str, list[CorruptionChoice]] = {name: [] for name in catalogue_names}
    for sample in samples:
        for choice in sample:
            if choice.name not in per_name:
                raise ValueError(f"sample contains {choice.name!r}, which is not in the catalogue")
            per_name[choice.name].append(choice)
    frequencies = {name: len(chs) / n for name, chs in per_name.items()}

    chosen: list[CorruptionChoice] = []
    for name, chs in per_name.items():
        k = len(chs)
        if 2 * k <= n:
            continue
        level_votes = Counter(s for c in chs for s in c.severities)
        severities = sorted(s for s, v in level_votes.items() if 2 * v > k)
        if not severities:
            severities = [statistics.median_low(sorted(s for c in chs for s in c.severities))]
        param_votes = Counter(_canonical(c.params) for c in chs)
        best, votes = param_votes.most_common(1)[0]
        params = json.loads(best) if 2 * votes > k else {}
        reason = next((c.reason for c in chs if c.severities == severities), chs[0].reason)
        chosen.append(CorruptionChoice(name=name, severities=severities, params=params, reason=reason))
    # Most agreed-on first; ties keep catalogue order (sort is stable).
    chosen.sort(key=lambda c: -frequencies[c.name])
    return VoteResult(chosen=chosen, frequencies=frequencies, n_samples=n)
