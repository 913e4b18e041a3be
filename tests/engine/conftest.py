from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import fake_models  # noqa: E402,F401  (registers the fake: backend)

