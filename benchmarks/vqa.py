"""VQA answering throughput: domainbench's batched answering vs a bare batched ``model.generate`` loop.

Both answer the same (image, question) pairs with the same batch size and the same max new tokens: the
reference builds the prompts, calls the processor with left padding and ``model.generate`` per batch, and
decodes, nothing else; domainbench goes through ``models.vqa_answering.answer_questions`` (prompt building,
the open/multiple-choice split, decoding and stripping). Prints answered questions per second for each and
their ratio (target >= 0.9), and whether the answers are identical.

    python benchmarks/vqa.py --quick                       # tiny random LLaVA built here, CPU
    python benchmarks/vqa.py --model hf-vlm:DIR --device cuda
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tiny-model builder lives with the tests

from domainbench.models import create_model  # noqa: E402
from domainbench.models.vlm_scoring import build_prompt, hwc_images, to_model  # noqa: E402
from domainbench.models.vqa_answering import Ask, answer_questions  # noqa: E402

QUESTIONS = ["Is this a shoe?", "What kind of garment is this?", "What is shown in this image? Answer briefly."]


def bare_loop(model: object, ims: list[np.ndarray], questions: list[str], batch: int, max_new: int) -> list[str]:
    proc, net = model.processor, model.model  # type: ignore[attr-defined]
    tok = proc.tokenizer
    out: list[str] = []
    for s in range(0, len(ims), batch):
        enc = proc(images=ims[s : s + batch], text=[build_prompt(proc, q) for q in questions[s : s + batch]],
                   return_tensors="pt", padding=True, padding_side="left")
        enc = to_model(enc, net, model.device)  # type: ignore[attr-defined]
        with torch.inference_mode():
            seqs = net.generate(**enc, max_new_tokens=max_new, do_sample=False, num_beams=1,
                                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        out += [t.strip() for t in tok.batch_decode(seqs[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 images x 3 questions (default 32 x 3)")
    ap.add_argument("--model", help="hf-vlm:NAME_OR_DIR (default: a tiny random LLaVA built in a temp folder)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; the best of each is reported")
    args = ap.parse_args()
    n_images = 8 if args.quick else 32
    tmp = tempfile.TemporaryDirectory()
    name = args.model
    if name is None:
        from tests.models.tiny_vlms import save_tiny_llava

        name = f"hf-vlm:{save_tiny_llava(Path(tmp.name) / 'llava')}"
    model = create_model(name, args.device)
    images = np.random.default_rng(0).integers(0, 256, (n_images, 32, 32, 3), dtype=np.uint8)
    asks = [Ask(i, q) for i in range(n_images) for q in QUESTIONS]
    ims = hwc_images(images, name)
    pair_ims, pair_qs = [ims[a.image] for a in asks], [a.question for a in asks]

    answer_questions(model, images[:1], asks[:2], args.batch_size, args.max_new_tokens)  # warm-up
    best_ours = best_bare = float("inf")
    for _ in range(args.repeats):  # interleaved, so machine load hits both alike
        t0 = time.perf_counter()
        ours = answer_questions(model, images, asks, args.batch_size, args.max_new_tokens)
        best_ours = min(best_ours, time.perf_counter() - t0)
        t0 = time.perf_counter()
        bare = bare_loop(model, pair_ims, pair_qs, args.batch_size, args.max_new_tokens)
        best_bare = min(best_bare, time.perf_counter() - t0)
    n = len(asks)
    print(f"model {name} on {args.device}: {n} questions, batch {args.batch_size}, max new tokens {args.max_new_tokens}")
    print(f"domainbench answer_questions: {n / best_ours:8.1f} questions/s")
    print(f"bare model.generate loop:     {n / best_bare:8.1f} questions/s")
    print(f"ratio (target >= 0.9): {best_bare / best_ours:.3f}   identical answers: {ours == bare}")


if __name__ == "__main__":
    main()
