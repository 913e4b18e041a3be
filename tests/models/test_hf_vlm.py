"""hf-vlm: generative VLMs scored by log-likelihood, checked against the contract written out plainly.

The reference below applies docs/generative-vlms.md literally, one full forward per (image,
class), with the processor tokenising P and P + continuation together with the image; the
backend shares the prefix's keys/values across classes and tokenises continuations once.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from domainbench.errors import UserInputError
from domainbench.models import create_model, list_models
from domainbench.models.generative import DEFAULT_QUESTION, VLMOptions, softmax_confidence
from domainbench.models.vlm_scoring import build_prompt
from tests.models.tiny_vlms import save_tiny_llava, save_tiny_qwen2_vl

CLASSES = ["T-shirt/top", "Trouser", "Ankle boot", "cat", "a bird on a ship"]
FAMILIES = {"llava": save_tiny_llava, "qwen2_vl": save_tiny_qwen2_vl}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vlms")
    out = {name: make(root / name) for name, make in FAMILIES.items()}
    out["llava_plain"] = save_tiny_llava(root / "llava_plain", chat_template=False, seed=1)
    return out


def images(n: int = 3, size: int = 28, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def plain_scores(folder: Path, ims: np.ndarray, classes: list[str], question: str, reduce: str = "sum") -> np.ndarray:
    """The contract, one (image, class) at a time, with nothing shared or batched (``both``: sum and mean)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True, dtype=torch.float32).eval()
    if processor.chat_template:
        turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        prompt = processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
    else:
        prompt = f"USER: {processor.image_token}\n{question} ASSISTANT:"
    out = np.zeros((len(ims), len(classes)))
    means = np.zeros((len(ims), len(classes)))
    with torch.no_grad():
        for i, im in enumerate(ims):
            for j, c in enumerate(classes):
                cont_text = c if prompt[-1].isspace() else " " + c
                ctx = processor(images=[im], text=[prompt], return_tensors="pt")
                whole = processor(images=[im], text=[prompt + cont_text], return_tensors="pt")
                n = ctx["input_ids"].shape[1]
                cont = whole["input_ids"][0, n:].tolist()
                inputs = dict(whole)
                inputs["input_ids"] = torch.tensor([ctx["input_ids"][0].tolist() + cont])
                logp = model(**inputs).logits[0].log_softmax(-1)
                total = sum(float(logp[n - 1 + k, t]) for k, t in enumerate(cont))
                out[i, j] = total
                means[i, j] = total / len(cont)
    return np.stack([out, means]) if reduce == "both" else means if reduce == "mean" else out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shared_prefix_scores_equal_the_plain_contract(folders: dict[str, Path], family: str) -> None:
    model = create_model(f"hf-vlm:{folders[family]}", "cpu")
    ims = images()
    refs = plain_scores(folders[family], ims, CLASSES, DEFAULT_QUESTION, "both")
    for reduce, ref in zip(("sum", "mean"), refs):
        model.configure(CLASSES, VLMOptions(score=reduce))
        # batch 2: two prefixes per forward, classes in padded chunks of 2 (3 chunks, ragged lengths)
        res = model.classify(ims, batch_size=2)
        np.testing.assert_allclose(res.scores, ref, atol=1e-4, rtol=0)
        assert (res.preds == ref.argmax(axis=1)).all()
        # unbatched gives the same numbers too
        np.testing.assert_allclose(model.classify(ims, batch_size=1).scores, ref, atol=1e-4, rtol=0)
    assert not np.allclose(refs[0], refs[1])  # multi-token class names: sum and mean differ


def test_fallback_prompt_without_a_chat_template(folders: dict[str, Path]) -> None:
    model = create_model(f"hf-vlm:{folders['llava_plain']}", "cpu")
    assert not model.processor.chat_template
    assert build_prompt(model.processor, "Q?") == "USER: <image>\nQ? ASSISTANT:"
    model.configure(CLASSES, VLMOptions())
    ims = images(2, seed=3)
    np.testing.assert_allclose(model.classify(ims, 4).scores, plain_scores(folders["llava_plain"], ims, CLASSES, DEFAULT_QUESTION),
                               atol=1e-4, rtol=0)


def test_question_ensemble_averages_class_scores(folders: dict[str, Path]) -> None:
    questions = ("What is this?", "Name the object in the picture.")
    model = create_model(f"hf-vlm:{folders['llava']}", "cpu")
    model.configure(CLASSES, VLMOptions(questions=questions))
    ims = images(2, seed=5)
    res = model.classify(ims, 8)
    per_q = [plain_scores(folders["llava"], ims, CLASSES, q) for q in questions]
    np.testing.assert_allclose(res.scores, (per_q[0] + per_q[1]) / 2, atol=1e-4, rtol=0)
    assert res.per_question is not None
    assert res.per_question.tolist() == [p.argmax(axis=1).tolist() for p in per_q]


def test_confidence_is_the_softmax_at_the_best_class() -> None:
    scores = np.array([[-1.0, -2.0, -3.0], [-5.0, -0.5, -0.5]])
    e = np.exp(scores)
    expected = [e[0, 0] / e[0].sum(), e[1, 1] / e[1].sum()]
    np.testing.assert_allclose(softmax_confidence(scores), expected, rtol=1e-12)


def test_vision_embeddings_are_unit_rows_per_image(folders: dict[str, Path]) -> None:
    for family in FAMILIES:
        model = create_model(f"hf-vlm:{folders[family]}", "cpu")
        model.configure(CLASSES, VLMOptions())
        ims = images(3, seed=7)
        emb = model.encode_image(model.preprocess(ims))
        assert emb.shape[0] == 3
        np.testing.assert_allclose(emb.norm(dim=1).numpy(), 1.0, atol=1e-5)
        # one image alone embeds as it does in a batch
        np.testing.assert_allclose(model.encode_image(model.preprocess(ims[1:2]))[0].numpy(), emb[1].numpy(), atol=1e-5)


def test_listing_names_the_known_families() -> None:
    names = list_models("hf-vlm:*")
    assert "hf-vlm:llava-hf/llava-1.5-7b-hf" in names
    assert any("Qwen2-VL" in n for n in names) and any("SmolVLM" in n for n in names)


def test_loading_errors_name_what_is_missing(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="has no config.json"):
        create_model(f"hf-vlm:{tmp_path}", "cpu")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((folders["llava"] / "config.json").read_text())
    with pytest.raises(UserInputError, match="has no processor"):
        create_model(f"hf-vlm:{bare}", "cpu")
    clip = tmp_path / "clip"
    clip.mkdir()
    (clip / "config.json").write_text(json.dumps({"model_type": "clip"}))
    (clip / "preprocessor_config.json").write_text("{}")
    with pytest.raises(UserInputError, match="not an image-text-to-text model"):
        create_model(f"hf-vlm:{clip}", "cpu")
    with pytest.raises(UserInputError, match="not available offline"):
        create_model("hf-vlm:nobody/no-such-vlm", "cpu")
    with pytest.raises(UserInputError, match="choice is for openai-vlm"):
        create_model(f"hf-vlm:{folders['llava']}", "cpu").configure(CLASSES, VLMOptions(mode="choice"))


def test_half_precision_scores_stay_close(folders: dict[str, Path]) -> None:
    """--dtype bfloat16 (the GPU default) runs end to end; pixels are cast to the model's dtype."""
    model = create_model(f"hf-vlm:{folders['llava']}", "cpu")
    ims = images(2, seed=9)
    model.configure(CLASSES, VLMOptions())
    full = model.classify(ims, 4).scores
    model.configure(CLASSES, VLMOptions(dtype="bfloat16"))
    assert next(model.model.parameters()).dtype == torch.bfloat16
    np.testing.assert_allclose(model.classify(ims, 4).scores, full, atol=0.05)


def test_a_vlm_folder_given_to_local_points_at_hf_vlm(folders: dict[str, Path]) -> None:
    with pytest.raises(UserInputError, match="loads as hf-vlm:"):
        create_model(f"local:{folders['llava']}", "cpu")
