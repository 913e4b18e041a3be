"""A run that meets an unreadable image its dataset scan missed: it fails with the file's name
before scoring that shard, and resumes past it with --skip-unreadable."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig
from domainbench.errors import UserInputError

DOMAIN = DomainConfig(domain="unreadable", corruptions=[CorruptionChoice(name="brightness", severities=[2], reason="r")])


def _encoded(fmt: str, seed: int = 0) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(buf, format=fmt)
    return buf.getvalue()


def _folder(tmp_path: Path, bad: str | None) -> Path:
    root = tmp_path / "ds"
    for c, cls in enumerate(("cat", "dog")):
        (root / cls).mkdir(parents=True)
        for i in range(4):
            (root / cls / f"{i}.png").write_bytes(_encoded("PNG", seed=10 * c + i))
    if bad:
        (root / "dog" / bad).write_bytes(_encoded("JPEG")[:300])
    return root


def test_a_file_the_scan_missed_fails_the_run_which_resumes_without_it(home: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from domainbench.engine import dataset_pin
    from domainbench.engine.runner import Engine
    from domainbench.store import open_store

    root = _folder(tmp_path, "9_truncated.jpg")
    cfg = RunConfig(models=["fake:a"], dataset=str(root), image_size=16, shard_size=3, workers=0, stability=False,
                    threat=False)
    store = open_store()
    monkeypatch.setattr(dataset_pin, "check_readable", lambda paths: None)  # as if the scan had missed the file
    with pytest.raises(UserInputError) as e:
        Engine(store).start(DOMAIN, cfg, run_id="stops")
    bad = root / "dog" / "9_truncated.jpg"
    assert str(e.value).startswith(f"{bad}: cannot decode (OSError: ")
    assert str(e.value).endswith("; remove or fix it and start a new run, or go on without it: "
                                 "`domainbench run --resume stops --skip-unreadable`")
    run = store.get_run("stops")
    assert run.status == "failed" and "cannot decode" in run.error
    stored = {u.shard for u in store.units("stops")}
    assert 2 not in stored  # the shard holding the file (indices 6..8) was never scored

    Engine(store).resume("stops", skip_unreadable=True)
    run = store.get_run("stops")
    assert run.status == "done" and run.config.skip_unreadable and run.n_unreadable == 1 and run.unreadable == [str(bad)]
    units = store.units("stops")
    assert sum(u.n for u in units if u.corruption == "clean") == 8 and sum(u.n_unreadable for u in units) == 2
