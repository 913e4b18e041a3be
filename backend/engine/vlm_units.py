"""What a generative model's result adds to a stored unit (the ``vlm`` field of UnitRecord)."""

from __future__ import annotations

from typing import Any

from domainbench.models.generative import VLMResult


def vlm_unit_fields(vlm: VLMResult | None) -> dict[str, Any]:
    """UnitRecord keyword arguments for a generative model's result; none for a dual encoder."""
    if vlm is None:
        return {}
    extras: dict[str, Any] = {"unparsed": vlm.unparsed}
    if vlm.answers is not None:
        extras["answers"] = list(vlm.answers)
    if vlm.per_question is not None:
        extras["question_preds"] = vlm.per_question.tolist()
    return {"vlm": extras}
