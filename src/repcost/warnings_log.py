"""Library warnings (torch, numpy, Hydra's) go to the run's log file, not to the console.

`logging.captureWarnings(True)` (repcost-train calls it first) routes `warnings.warn` through logging (logger
`py.warnings`), and repcost's job logging (configs/hydra/job_logging/repcost.yaml) gives its console handler
`console_filter()`, which keeps those records off the console; the file handler (RUN_DIR/train.log) keeps them.
So stderr carries only repcost's own lines. The filter's factory turns the capture on as well, so every process
that configures repcost's job logging (joblib and submitit job processes too) captures its warnings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

WARNINGS_LOGGER = "py.warnings"
FILE_ONLY = "repcost.file"  # records for the run's log file only (its provenance header)


def console_filter() -> Callable[[logging.LogRecord], bool]:
    """The console handler's filter (a dictConfig factory): warnings are captured, and kept off the console, as
    are the records of the FILE_ONLY logger."""
    logging.captureWarnings(True)
    return lambda record: record.name not in (WARNINGS_LOGGER, FILE_ONLY)
