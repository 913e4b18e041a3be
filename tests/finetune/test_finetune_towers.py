"""Fine-tuning open_clip and hf image towers, LoRA, mixed precision and gradient accumulation.

The models are built tiny from configs (the fixtures of tests/models/test_hub_backends.py): random
weights, 32 px, one layer; what is checked is the plumbing (which weights train, what the saved folder
loads as, what it embeds), not robustness."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import load_file

from domainbench.data import load_sample
from domainbench.errors import UserInputError
from domainbench.models import create_model
from domainbench.tuning import train
from domainbench.tuning.towers import HFImageTower
from domainbench.tuning.train import CHECKPOINT_FILE, _losses, accumulate
from tests.cli_runner import run_cli
from tests.models.test_hub_backends import PROCESSORS, TINY_OC, build_hf

PLAN = """domain = "noise and blur"

[[corruptions]]
name = "gaussian_noise"
severities = [4]

[[corruptions]]
name = "gaussian_blur"
severities = [4]
"""
FAST = {"epochs": 1, "batch_size": 8, "lr": 1e-3, "image_size": 32}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ftt")
    ds = load_sample()
    for i in range(24):
        folder = root / "images" / f"c{ds.labels[i] % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(ds.arrays[i]).save(folder / f"{i:03d}.png")
    plan = root / "plan.toml"
    plan.write_text(PLAN)
    return root / "images", plan


@pytest.fixture(scope="module")
def tiny_oc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("oc")
    (root / "tiny-test.json").write_text(json.dumps(TINY_OC))
    open_clip.add_model_config(root / "tiny-test.json")
    torch.manual_seed(0)
    torch.save(open_clip.create_model("tiny-test").state_dict(), root / "ckpt.pt")
    return root / "ckpt.pt"


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import transformers

    out = {}
    for family in ("clip", "siglip"):
        cls, kwargs = PROCESSORS[family]
        torch.manual_seed(0)
        model, tok = build_hf(family)
        d = tmp_path_factory.mktemp(f"hf-{family}")
        model.save_pretrained(d)
        tok.save_pretrained(d)
        getattr(transformers, cls)(**kwargs).save_pretrained(d)
        out[family] = d
    return out


def _images(n: int = 6) -> np.ndarray:
    return np.repeat(load_sample().arrays[100:100 + n, ..., None], 3, axis=-1)


def _trained_tower(out: Path, module: torch.nn.Module) -> torch.nn.Module:
    """The base tower with the checkpoint's trained weights (an independent route to what was saved)."""
    tower = copy.deepcopy(module)
    tower.load_state_dict(torch.load(out / CHECKPOINT_FILE, weights_only=True)["tower"])
    return tower.eval()


def test_open_clip_tower_trains_and_loads_as_local(data: tuple[Path, Path], tiny_oc: Path, tmp_path: Path) -> None:
    images, plan = data
    name = f"open_clip:tiny-test/{tiny_oc}"
    result = train(name, plan, images, tmp_path / "ft", **FAST)
    assert all(np.isfinite(h["loss"]) for h in result.state.history)
    base = create_model(name, "cpu")
    tuned = create_model(result.model, "cpu")
    assert type(tuned).__name__ == "OpenClipModel"
    x = _images()
    # it embeds as the checkpoint's trained visual tower, normalised; the text tower is the base's
    tower = _trained_tower(tmp_path / "ft", base.model.visual)
    with torch.no_grad():
        expect = F.normalize(tower(base.preprocess(x)), dim=-1)
    torch.testing.assert_close(tuned.embed_images(x), expect, atol=1e-5, rtol=0)
    assert not torch.allclose(tuned.embed_images(x), base.embed_images(x), atol=1e-4)
    torch.testing.assert_close(tuned.encode_text(["a photo of a cat."]), base.encode_text(["a photo of a cat."]))
    saved = load_file(str(tmp_path / "ft" / "open_clip_model.safetensors"))
    assert {k for k, v in saved.items() if not torch.equal(v, base.model.state_dict()[k])} <= {k for k in saved if k.startswith("visual.")}
    as_tuples = lambda cfg: {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in cfg.items()}  # noqa: E731  (JSON lists)
    assert as_tuples(tuned.preprocess_cfg) == as_tuples(base.preprocess_cfg)


@pytest.mark.parametrize("family", ["clip", "siglip"])
def test_hf_image_tower_is_get_image_features(hf_dirs: dict[str, Path], family: str) -> None:
    m = create_model(f"local:{hf_dirs[family]}", "cpu")
    pix = m.preprocess(_images())
    with torch.no_grad():
        ref = m.model.get_image_features(pixel_values=pix)
        ref = ref if isinstance(ref, torch.Tensor) else ref.pooler_output
        torch.testing.assert_close(HFImageTower(m.model)(pix), ref, atol=0, rtol=0)


@pytest.mark.parametrize("family", ["clip", "siglip"])
def test_hf_tower_trains_and_loads_as_local(data: tuple[Path, Path], hf_dirs: dict[str, Path], family: str, tmp_path: Path) -> None:
    images, plan = data
    name = f"local:{hf_dirs[family]}"
    result = train(name, plan, images, tmp_path / "ft", **FAST)
    base, tuned = create_model(name, "cpu"), create_model(result.model, "cpu")
    assert type(tuned).__name__ == "HFDualEncoder" and tuned.family == family
    x = _images()
    tower = _trained_tower(tmp_path / "ft", HFImageTower(base.model))
    with torch.no_grad():
        expect = F.normalize(tower(base.preprocess(x)), dim=-1)
    torch.testing.assert_close(tuned.embed_images(x), expect, atol=1e-5, rtol=0)
    assert not torch.allclose(tuned.embed_images(x), base.embed_images(x), atol=1e-4)
    torch.testing.assert_close(tuned.encode_text(["a photo of a cat."]), base.encode_text(["a photo of a cat."]))


def test_lora_trains_only_the_adapters_and_the_merged_model_loads(data: tuple[Path, Path], tiny_oc: Path, tmp_path: Path) -> None:
    images, plan = data
    name = f"open_clip:tiny-test/{tiny_oc}"
    train(name, plan, images, tmp_path / "ft", trainable="lora", lora_rank=4, lora_alpha=8, **{**FAST, "epochs": 2})
    base = create_model(name, "cpu")
    ckpt = torch.load(tmp_path / "ft" / CHECKPOINT_FILE, weights_only=True)["tower"]
    lora_keys = [k for k in ckpt if "lora_" in k]
    # adapters on the MLP linears only (attention's out_proj is read by nn.MultiheadAttention directly)
    assert lora_keys and all(".mlp.c_fc." in k or ".mlp.c_proj." in k for k in lora_keys)
    assert any("lora_B" in k and ckpt[k].abs().max() > 0 for k in lora_keys)  # B starts at zero: it trained
    # every base weight is unchanged: the wrapped layers' base_layer and all the others
    ref = base.model.visual.state_dict()
    plain = {k.removeprefix("base_model.model.").replace(".base_layer.", "."): v for k, v in ckpt.items() if "lora_" not in k}
    assert plain.keys() == ref.keys() and all(torch.equal(plain[k], ref[k]) for k in ref)
    adapter = load_file(str(tmp_path / "ft" / "lora_adapter.safetensors"))
    assert adapter and all("lora_" in k for k in adapter)
    # the saved (merged) model embeds as the adapted tower and unlike the base
    tuned = create_model(f"local:{tmp_path / 'ft'}", "cpu")
    from domainbench.tuning.lora import wrap

    adapted = wrap(copy.deepcopy(base.model.visual), 4, 8.0, "linear")
    adapted.load_state_dict(ckpt)
    x = _images()
    with torch.no_grad():
        expect = F.normalize(adapted.eval()(base.preprocess(x)), dim=-1)
    torch.testing.assert_close(tuned.embed_images(x), expect, atol=1e-5, rtol=0)
    assert (tuned.embed_images(x) - base.embed_images(x)).abs().max() > 1e-4


def test_grad_accum_micro_batches_equal_one_batch() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    frozen = copy.deepcopy(net).requires_grad_(False)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x, xc = torch.randn(12, 3, 8, 8), torch.randn(12, 3, 8, 8)
    grads, losses = [], []
    for k in (1, 3, 4):
        net.zero_grad(set_to_none=True)
        losses.append(accumulate(net, frozen, x, xc, 2.0, k))
        grads.append([p.grad.clone() for p in net.parameters()])
    # independent: autograd of the whole batch's L1 + λ·L2
    net.zero_grad(set_to_none=True)
    l1, l2 = _losses(net, frozen, x, xc)
    (l1 + 2.0 * l2).backward()
    for g in grads:
        for a, b in zip(g, net.parameters(), strict=True):
            torch.testing.assert_close(a, b.grad, atol=1e-6, rtol=0)
    for a, b in losses:
        assert float(a) == pytest.approx(l1.item(), abs=1e-6) and float(b) == pytest.approx(l2.item(), abs=1e-6)


def test_grad_accum_and_bf16_train_end_to_end(data: tuple[Path, Path], tmp_path: Path) -> None:
    images, plan = data
    one = train("embedded:fmnist-plain", plan, images, tmp_path / "k1", **{**FAST, "image_size": 28}).state.history
    four = train("embedded:fmnist-plain", plan, images, tmp_path / "k4", grad_accum=4, **{**FAST, "image_size": 28}).state.history
    assert four[0]["l1"] == pytest.approx(one[0]["l1"], abs=1e-5) and four[0]["l2"] == pytest.approx(one[0]["l2"], abs=1e-5)
    bf = train("embedded:fmnist-plain", plan, images, tmp_path / "bf", precision="bf16", **{**FAST, "image_size": 28})
    # bf16 autocast on CPU: the same losses to bf16's precision (8 bits of mantissa), float32 weights saved
    assert bf.state.history[0]["l1"] == pytest.approx(one[0]["l1"], abs=2e-2)
    w = load_file(str(tmp_path / "bf" / "model.safetensors"))
    assert all(v.dtype == torch.float32 for v in w.values() if v.is_floating_point())


@pytest.mark.parametrize(("extra", "message"), [
    (["--precision", "fp16"], "--precision fp16 needs a CUDA device"),
    (["--precision", "fp8"], "precision must be fp32, bf16 or fp16"),
    (["--grad-accum", "3"], "--grad-accum 3 does not divide --batch-size 8"),
    (["--lora", "--lora-targets", "nope"], "--lora-targets 'nope': nope names no layer of the image tower"),
    (["--lora", "--trainable", "all"], "--lora and --trainable all disagree"),
    (["MODEL", "openai-vlm:gpt-4o"], "has none to train"),
])
def test_bad_options_are_one_error_line(data: tuple[Path, Path], tmp_path: Path, extra: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    images, plan = data
    model = "embedded:fmnist-plain"
    if extra[0] == "MODEL":
        model, extra = extra[1], []
    args = ["finetune", model, "--plan", str(plan), "--dataset", str(images), "-o", str(tmp_path / "out"), "--image-size", "28",
            "--batch-size", "8", *extra]
    code, _, err = run_cli(args, capsys, monkeypatch)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()


def test_lora_resumes_bit_identically(data: tuple[Path, Path], tmp_path: Path) -> None:
    from domainbench.tuning import resume

    images, plan = data
    opts = {**FAST, "image_size": 28, "trainable": "lora", "lora_rank": 2}
    train("embedded:fmnist-plain", plan, images, tmp_path / "whole", **{**opts, "epochs": 2})
    train("embedded:fmnist-plain", plan, images, tmp_path / "half", **opts)
    resume(tmp_path / "half", epochs=2)
    a, b = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("whole", "half"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    base = load_file(str(Path(__file__).parents[2] / "backend/models/weights/fmnist-plain.safetensors"))
    # only the head's linear layers carry adapters, so only they move once merged
    changed = sorted(k for k in a if not torch.equal(a[k], base[k]))
    assert changed and all(k.startswith("image_tower.head.") and k.endswith(".weight") for k in changed)
