from __future__ import annotations

import os

# Set before any test imports albumentations / transformers: no phoning home, no hub access.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("DOMAINBENCH_MONGO_URI", None)
os.environ.pop("DOMAINBENCH_LLM_BASE_URL", None)
