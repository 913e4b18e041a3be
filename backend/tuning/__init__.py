"""Robustness fine-tuning of a model's image tower (the embedding-stability paper's §6.1).

``train(...)`` fine-tunes on the user's own unlabelled images under the domain plan's corruptions
and writes a ``local:`` model folder; ``resume(OUT)`` continues it; ``evaluate_heldout(OUT)`` runs the
base and the fine-tuned model on the images training never saw. See docs/finetune.md.
"""

from __future__ import annotations

from domainbench.tuning.train import (FinetuneDiverged, FinetuneOptions, FinetuneResult, resume, train)

__all__ = ["FinetuneDiverged", "FinetuneOptions", "FinetuneResult", "resume", "train"]
