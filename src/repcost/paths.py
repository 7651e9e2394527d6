"""Where repcost's Hydra configs live: $REPCOST_CONFIG_DIR, the installed package, or the checkout.

The top-level configs/ of the checkout is the one source. A wheel (or `pip install .`) ships it as
the data package `repcost.configs`, i.e. the directory repcost/configs/ next to this file; an
editable install has no such directory and reads the checkout's configs/ directly.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout (meaningless for an installed wheel)


def find_config_dir() -> Path:
    """The directory holding config.yaml (Hydra needs a real directory, not a zip resource)."""
    env = os.environ.get("REPCOST_CONFIG_DIR")
    if env:
        return Path(env).resolve()
    packaged = Path(str(resources.files("repcost").joinpath("configs")))
    if (packaged / "config.yaml").is_file():
        return packaged.resolve()
    return (REPO_ROOT / "configs").resolve()


CONFIG_DIR = find_config_dir()
