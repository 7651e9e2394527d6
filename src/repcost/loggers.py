"""Optional experiment trackers. The default (`logger: none`) needs nothing beyond repcost's dependencies.

`logger=tensorboard` needs the extra: `pip install 'repcost[tensorboard]'`. The training engine calls
`log(rec)` for each metrics.jsonl record, and `hparams(config, summary)` and `close()` at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError

LOGGERS = ("none", "tensorboard")


def check_logger(name: Any) -> str:
    """The validated `logger` config value; ConfigError if unknown or if its package is not installed."""
    name = "none" if name is None else str(name)
    if name not in LOGGERS:
        raise ConfigError("logger", name, "one of " + ", ".join(LOGGERS))
    if name == "tensorboard":
        try:
            import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it)
        except ImportError:
            raise ConfigError("logger", name, "none, or install the extra: pip install 'repcost[tensorboard]'") from None
    return name


def _scalars(d: dict, prefix: str = "") -> dict[str, float]:
    """The finite-or-not numbers of a (nested) dict, keys joined by '/' (TensorBoard's grouping)."""
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_scalars(v, key + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def _hparam_values(config: dict) -> dict[str, Any]:
    """A run config flattened to dotted keys; TensorBoard's hparams take only numbers, strings and bools."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in _hparam_values(v).items()})
        elif isinstance(v, (int, float, str, bool)):
            out[k] = v
        elif v is not None:
            out[k] = str(v)  # lists (widths, phases) as text
    return out


class TensorBoardLogger:
    """Writes a run's scalars and hyper-parameters as TensorBoard events under RUN_DIR/tensorboard/."""

    def __init__(self, run_dir: Path | str):
        # imported here: tensorboard is an optional extra
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        self._writer = SummaryWriter(log_dir=str(self.log_dir))

    def log(self, rec: dict) -> None:
        """Every number of one metrics record (`rec["step"]` is the x axis; nested dicts become groups)."""
        step = int(rec["step"])
        for key, value in _scalars(rec).items():
            if key != "step":
                self._writer.add_scalar(key, value, global_step=step)

    def hparams(self, config: dict, summary: dict) -> None:
        """The run's config as hyper-parameters, and its final numeric summary as their metrics."""
        metrics = {f"final/{k}": v for k, v in _scalars(summary).items()}
        # run_name="." keeps the hparams event in this run's directory instead of a timestamped subdir
        self._writer.add_hparams(_hparam_values(config), metrics, run_name=".")

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()
