from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from domainbench.store import Store, open_store  # noqa: E402
from fe_synthetic import REAL_IMAGES  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _scan_streamlit_components_once() -> None:
    """Every new AppTest scans all installed packages for Streamlit component manifests (about
    4 s here); a server does it once at start. The scan's result cannot change during a test
    session, so it is made once."""
    import functools

    from streamlit.components.v2 import manifest_scanner

    patch = pytest.MonkeyPatch()
    patch.setattr(manifest_scanner, "scan_component_manifests", functools.cache(manifest_scanner.scan_component_manifests))
    yield
    patch.undo()


@pytest.fixture
def store(home: Path) -> Store:
    s = open_store()
    yield s
    s.close()


@pytest.fixture
def populated(store: Store) -> Store:
    """Two finished runs in two domains and a newer run still running with 2 cells missing."""
    import fe_synthetic as synthetic

    synthetic.populate(store, run_id="20250101-000000-night-abcd")
    synthetic.populate(store, run_id="20250102-000000-xray-ef01", domain="chest x-rays from portable scanners",
                       created_at="2025-01-02T00:00:00+00:00")
    synthetic.populate(store, run_id="20250103-000000-live-1234", status="running", skip_cells=2,
                       created_at="2025-01-03T00:00:00+00:00")
    return store


#: the plan of the real run: one unsafe-prone (brightness) and one safe family, a few severities
REAL_DOMAIN = "grainy night photos of clothing in a shop window"



@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real small run, built once per session: both embedded models on REAL_IMAGES bundled sample images,
    with stability and PD threat on a small scale. Returns ($DOMAINBENCH_HOME, run id)."""
    import domainbench
    from domainbench.records.config import CorruptionChoice, DomainConfig, RunConfig

    home = tmp_path_factory.mktemp("real-run") / "home"
    domain = DomainConfig(domain=REAL_DOMAIN, corruptions=[
        CorruptionChoice(name="gaussian_noise", severities=[1, 3, 5], reason="sensor noise in dim light"),
        CorruptionChoice(name="brightness", severities=[2, 5], reason="reflections on the glass"),
    ])
    cfg = RunConfig(dataset="sample", limit=REAL_IMAGES, workers=0, shard_size=8, stability_images=8, stability_points=3,
                    threat_anchors=4)
    store = open_store(None, home)
    try:
        run_id = domainbench.run(domain, run_config=cfg, store=store).id
    finally:
        store.close()
    return home, run_id


@pytest.fixture
def real_store(real_run: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> Store:
    """The real run's store as this test's $DOMAINBENCH_HOME (read only: tests share it)."""
    home, _ = real_run
    monkeypatch.setenv("DOMAINBENCH_HOME", str(home))
    monkeypatch.delenv("DOMAINBENCH_MONGO_URI", raising=False)
    s = open_store()
    yield s
    s.close()
