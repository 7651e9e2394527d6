"""repcost: experiments on the representation cost of weight-decay-trained networks.

In a notebook: `run = repcost.load_run(dir)` (config, summary, metrics, analysis arrays, `.model()`,
`.data()`) and `rows = repcost.load_sweep(dir)` (a sweep's runs.csv as dicts).
"""

from .api import Run, load_run, load_sweep

__version__ = "0.1.0"
__all__ = ["Run", "__version__", "load_run", "load_sweep"]
