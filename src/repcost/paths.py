"""Where repcost's Hydra configs live: $REPCOST_CONFIG_DIR, the installed package, or the checkout.

The top-level configs/ of the checkout is the one source. A wheel (or `pip install .`) ships it as
the data package `repcost.configs`, i.e. the directory repcost/configs/ next to this file; an
editable install has no such directory and reads the checkout's configs/ directly.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout (meaningless for an installed wheel)
_PACKAGED = Path(__file__).resolve().parent / "configs"  # a wheel's copy (Hydra reads a real directory)
CONFIG_DIR = Path(os.environ.get("REPCOST_CONFIG_DIR")
                  or (_PACKAGED if (_PACKAGED / "config.yaml").is_file() else REPO_ROOT / "configs")).resolve()
