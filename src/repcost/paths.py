"""Where repcost's Hydra configs live (the checkout's configs/, or $REPCOST_CONFIG_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = Path(os.environ.get("REPCOST_CONFIG_DIR", REPO_ROOT / "configs")).resolve()
