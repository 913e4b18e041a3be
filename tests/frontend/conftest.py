from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from backend.store import Store, open_store  # noqa: E402


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
