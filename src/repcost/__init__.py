"""repcost: experiments on the representation cost of weight-decay-trained networks.

In a notebook: `run = repcost.load_run(dir)` (config, summary, metrics, analysis arrays, `.model()`,
`.data()`) and `rows = repcost.load_sweep(dir)` (a sweep's runs.csv as dicts).

The names load on first use (PEP 562), so `import repcost` and the command lines start without torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Run", "__version__", "load_run", "load_sweep"]


def __getattr__(name: str) -> Any:
    if name in ("Run", "load_run", "load_sweep"):
        from . import api

        return getattr(api, name)
    if name == "__version__":
        from .provenance import repcost_version

        return repcost_version()
    raise AttributeError(f"module 'repcost' has no attribute {name!r}")
