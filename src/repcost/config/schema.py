"""Schemas for the train/analysis groups and top-level keys, and `validate` for a whole run.

Hydra composes plain YAML; `validate` merges each section into its dataclass schema (the
model/data schema is chosen by the section's `name`), so an unknown key, a wrong type or an
impossible value becomes one ConfigError naming the key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import typing
from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from ..errors import ConfigError, check, did_you_mean
from .messages import type_allowed
from ..registry import ANALYSES, DATASETS, MODELS, load_plugins
from .limits import check_limits

OPTIMIZERS = ("gd", "sgd", "adam")
SCHEDULES = ("constant", "cosine", "linear", "exponential")
REG_SCALES = ("one", "per_depth", "half")  # s = 1, 1/L, 1/2 (docs/ARCHITECTURE.md, Conventions)
LOSSES = ("mse", "cross_entropy")
SWITCHES = ("auto", "on", "off")


@dataclass
class PhaseConfig:
    optimizer: str = "gd"  # gd (full-batch), sgd (minibatch), adam
    lr: float = 0.01
    steps: int = 1000
    batch_size: Optional[int] = None  # minibatch size for sgd/adam; null = full batch
    momentum: float = 0.0  # sgd only
    schedule: str = "constant"  # constant | cosine | linear | exponential
    final_lr_ratio: float = 0.01  # lr at the phase's end / lr, for decaying schedules
    # λ multiplier while this phase trains (λ-continuation: a larger λ early sheds the high-norm
    # interpolating solution Adam finds first; summaries and logs always report the stated λ)
    lam_factor: float = 1.0
    # before the phase's first step, move each member along the per-unit rescalings that keep its function
    # to the least penalty there (analysis.critical.rebalance: the balance a critical point has, Jacot 2023 Remark 6);
    # optimisers reach it only at a rate ~lr·λ per step
    rebalance: bool = False
    # before the phase's first step (and before `rebalance`), re-place up to this many idle units of each
    # member, one at a time, where a new unit lowers this phase's objective most: the unit feature that most
    # violates the infinite-width problem's optimality condition (analysis.relu_1d.insert_units; a conditional-
    # gradient step, Bach 2017). It escapes the stalls where no existing unit's gradient helps. MSE only
    insert_units: int = 0
    # before the phase's first step (after insert_units, before rebalance), make each member the minimiser of
    # the convex problem at this phase's objective: the global minimum over nets of any width, all units re-placed
    # at once (analysis.relu_1d.place_convex_minimum; Bach 2017, Savarese et al. 2019 §3). Two-layer ReLU nets on
    # 1-D inputs with a scalar output, MSE only; width >= the minimiser's units
    convex_units: bool = False
    # before the phase's first step (after insert_units and convex_units), merge each group of units whose
    # pre-activations over the data have cosine above this into one (analysis.alignment.merge_units; Jacot et al.
    # 2022 §3.1: aligned units act as one, and training merges them only slowly); null = off. Chains of matrices
    merge_units: Optional[float] = None
    # before the phase's first step (after the options above), move each member towards a critical point of this
    # phase's objective (train/polish.py, full batch in float64: dead units removed, a smoothing continuation, an
    # active set): at most this many L-BFGS iterations and Newton steps (0 = off) and `polish_seconds` seconds, until
    # the certificate's Clarke measure is at most `polish_tol`; a member that starts there takes no iteration
    polish: int = 0
    polish_seconds: float = 600.0
    polish_tol: float = 1e-7

    def __post_init__(self):
        check(self.optimizer in OPTIMIZERS, "optimizer", self.optimizer, "one of " + ", ".join(OPTIMIZERS))
        check(math.isfinite(self.lr) and self.lr > 0, "lr", self.lr, "a finite learning rate > 0")
        check(self.steps >= 0, "steps", self.steps, "an integer >= 0")
        check(self.batch_size is None or self.batch_size > 0, "batch_size", self.batch_size,
              "a positive integer or null (full batch)")
        check(self.optimizer != "gd" or self.batch_size is None, "batch_size", self.batch_size,
              "null for optimizer=gd (full-batch gradient descent); use optimizer=sgd for minibatches")
        check(0 <= self.momentum < 1, "momentum", self.momentum, "a number in [0, 1)")
        check(self.schedule in SCHEDULES, "schedule", self.schedule, "one of " + ", ".join(SCHEDULES))
        check(0 < self.final_lr_ratio <= 1, "final_lr_ratio", self.final_lr_ratio, "a number in (0, 1]")
        check(math.isfinite(self.lam_factor) and self.lam_factor > 0, "lam_factor", self.lam_factor, "a λ multiplier > 0")
        check(self.insert_units >= 0, "insert_units", self.insert_units, "an integer >= 0 (0 = off)")
        check(self.merge_units is None or 0 < self.merge_units < 1, "merge_units", self.merge_units,
              "a cosine in (0, 1) or null (off)")
        check(self.polish >= 0, "polish", self.polish, "an integer >= 0 (iterations; 0 = off)")
        check(self.polish_seconds > 0, "polish_seconds", self.polish_seconds, "a time budget in seconds > 0")
        check(self.polish_tol > 0, "polish_tol", self.polish_tol, "a tolerance > 0 (relative to the penalty's pull)")


@dataclass
class CertifyConfig:
    """Certified stopping (train/certify.py; docs/recipes-and-certificates.md, "Certified stopping"): with
    `gap_tol` set, a run stops as soon as the duality gap of its objective says it is within gap_tol (relative) of
    the global minimum, checked at the end of every phase that trains the stated objective (lam_factor 1), and
    after its schedule escalates by up to `rounds` rounds of `phases`, round r with steps × step_growth^r and
    insert_units × (r + 1). Only where the gap exists (two-layer ReLU nets on 1-D inputs, MSE, λ > 0). With
    `cost_tol` set the run also judges C(θ) against the min-norm interpolant's cost (Savarese et al. 2019 Thm 3.3):
    the gap certifies the regularised problem, C(θ)/C_min says how close its λ leaves it to the interpolation one."""

    gap_tol: Optional[float] = None  # null: off
    # null: off; |C(θ)/C_min − 1| ≤ cost_tol, judged at the end (1-D data). Added after runs with certify existed:
    # part of their identity only where set (repcost.identity)
    cost_tol: Optional[float] = field(default=None, metadata={"identity": "set"})
    rounds: int = 0  # the escalation budget: at most this many rounds after the schedule
    phases: List[PhaseConfig] = field(default_factory=list)  # one escalation round
    step_growth: float = 2.0

    def __post_init__(self):
        check(self.gap_tol is None or 0 < self.gap_tol < 1, "gap_tol", self.gap_tol,
              "null (off) or a relative duality gap in (0, 1)")
        check(self.cost_tol is None or 0 < self.cost_tol < 1, "cost_tol", self.cost_tol,
              "null (off) or a relative tolerance in (0, 1)")
        check(self.rounds >= 0, "rounds", self.rounds, "an integer >= 0")
        check(self.rounds == 0 or len(self.phases) > 0, "phases", self.phases,
              "a non-empty list of phases (one escalation round) when rounds > 0")
        check(not self.phases or self.phases[-1].lam_factor == 1.0, "phases[-1].lam_factor",
              self.phases[-1].lam_factor if self.phases else None,
              "1.0: a round must end on the stated objective, where the gap is checked")
        check(math.isfinite(self.step_growth) and self.step_growth >= 1, "step_growth", self.step_growth, "a factor >= 1")


@dataclass
class TrainConfig:
    lam: float = 1e-4  # λ in objective = loss + λ·s·Σ‖p‖²
    reg_scale: str = "one"  # s: one (Jacot 2022), per_depth = 1/L (Jacot 2023, Ongie C_L), half (Savarese)
    loss: str = "mse"  # mse = (1/N)Σ‖f(x_i)−y_i‖² | cross_entropy
    phases: List[PhaseConfig] = field(default_factory=lambda: [PhaseConfig()])
    target_loss: Optional[float] = None  # stop once the train data loss is <= this
    plateau_window: int = 0  # stop when the objective improved by < plateau_rel_tol over this many steps (0 = off)
    plateau_rel_tol: float = 1e-7
    check_every: int = 10  # steps between stop/NaN checks (each costs a device sync)
    log_every: int = 100  # steps between metrics.jsonl lines
    # steps between checkpoints (0 = only at the end); not part of the run's identity: a resumed run
    # matches an unbroken one
    checkpoint_every: int = field(default=0, metadata={"identity": False})
    progress: bool = field(default=True, metadata={"identity": False})  # tqdm progress bar
    ensemble_size: int = 1  # K > 1 trains seeds seed … seed+K−1 as one stacked model
    # stop when ‖∇objective‖/‖θ‖ <= grad_tol (checked every check_every steps; in the last phase it
    # ends the run, in earlier phases the phase once every member reached it); null = off
    grad_tol: Optional[float] = None
    # a run whose objective exceeds diverge_factor × its first value has diverged: it fails (0 = off)
    diverge_factor: float = 1e6
    # how steps execute (docs/ARCHITECTURE.md, "Fast steps"); results agree with eager to float
    # round-off, so neither is part of the run's identity. auto: compile where the budget makes the
    # compile time pay (train.step.fast_step_options), CUDA graphs on every CUDA run
    compile: str = field(default="auto", metadata={"identity": False})  # auto | on | off
    cuda_graphs: str = field(default="auto", metadata={"identity": False})  # auto | on | off
    # CPU runs set parameter and optimiser-moment entries below the smallest normal float to 0 every
    # check_every steps (subnormals cost x86 CPUs 10-100x per operation); the function changes by
    # less than 1e-38, so this is not part of the run's identity either
    flush_subnormals: bool = field(default=True, metadata={"identity": False})
    certify: CertifyConfig = field(default_factory=CertifyConfig)

    def __post_init__(self):
        check(math.isfinite(self.lam) and self.lam >= 0, "lam", self.lam, "a finite regularisation strength λ >= 0")
        check(self.reg_scale in REG_SCALES, "reg_scale", self.reg_scale, "one of " + ", ".join(REG_SCALES))
        check(self.loss in LOSSES, "loss", self.loss, "one of " + ", ".join(LOSSES))
        check(len(self.phases) > 0, "phases", self.phases, "a non-empty list of optimiser phases")
        check(self.phases[-1].lam_factor == 1.0, "phases[-1].lam_factor", self.phases[-1].lam_factor,
              "1.0: the last phase must train the stated objective, so the run ends at one of its critical points")
        for i, ph in enumerate(self.phases):
            check(ph.insert_units == 0 or self.loss == "mse", f"phases[{i}].insert_units", ph.insert_units,
                  "0 with loss=cross_entropy (units are placed by the MSE residual)")
            check(not ph.convex_units or self.loss == "mse", f"phases[{i}].convex_units", ph.convex_units,
                  "false with loss=cross_entropy (the convex problem is the MSE one)")
        check(self.target_loss is None or self.target_loss >= 0, "target_loss", self.target_loss, "null or >= 0")
        check(self.plateau_window >= 0, "plateau_window", self.plateau_window, "an integer >= 0")
        check(self.plateau_rel_tol >= 0, "plateau_rel_tol", self.plateau_rel_tol, "a number >= 0")
        for key in ("check_every", "log_every"):
            check(getattr(self, key) > 0, key, getattr(self, key), "a positive integer")
        check(self.ensemble_size >= 1, "ensemble_size", self.ensemble_size, "an integer >= 1")
        check(self.checkpoint_every >= 0, "checkpoint_every", self.checkpoint_every, "an integer >= 0")
        check(self.grad_tol is None or self.grad_tol > 0, "grad_tol", self.grad_tol, "null or a number > 0")
        check(self.diverge_factor == 0 or self.diverge_factor > 1, "diverge_factor", self.diverge_factor,
              "0 (off) or a factor > 1")
        for key in ("compile", "cuda_graphs"):
            check(getattr(self, key) in SWITCHES, key, getattr(self, key), "one of " + ", ".join(SWITCHES))

    @property
    def all_phases(self) -> list[PhaseConfig]:
        """The phases the budget allows: the schedule, then `certify.rounds` escalation rounds (CertifyConfig)."""
        c = self.certify
        rounds = [dataclasses.replace(ph, steps=int(round(ph.steps * c.step_growth ** r)),
                                      insert_units=ph.insert_units * (r + 1))
                  for r in range(c.rounds if c.gap_tol is not None else 0) for ph in c.phases]
        return list(self.phases) + rounds

    def round_of(self, phase: int) -> int:
        """The escalation round (1, 2, …) phase `phase` of `all_phases` belongs to; 0 for the schedule."""
        extra = phase - len(self.phases)
        return 0 if extra < 0 else extra // max(len(self.certify.phases), 1) + 1

    @property
    def total_steps(self) -> int:
        """Step budget summed over the phases (escalation rounds included)."""
        return sum(p.steps for p in self.all_phases)


@dataclass
class CriticalOptions:
    """The critical-point certificate (analysis/critical.py), computed at the end of every finished run unless disabled."""

    enabled: bool = True
    descent_evals: int = 0  # > 0: L-BFGS evaluations of the descent check (critical.descent_rel)
    # Clarke stationarity over at most this many kinks (beyond: not computed). Up to 256 the kinks' columns are exact
    # and cheap (one gradient each, ~1 s on the Jacot 2023 Fig 1 net); above, a matrix-free solve costs tens of s
    max_kinks: int = 256
    stationarity_tol: float = 1e-2  # critical point: ‖∇objective‖ ≤ tol · 2λs‖θ_reg‖
    balance_tol: float = 1e-2  # critical point: unit and linear balance gaps ≤ tol

    def __post_init__(self):
        check(self.descent_evals >= 0, "descent_evals", self.descent_evals,
              "an integer >= 0 (L-BFGS evaluations of the descent check; 0 = off)")
        check(self.max_kinks >= 0, "max_kinks", self.max_kinks, "an integer >= 0")
        check(self.stationarity_tol > 0, "stationarity_tol", self.stationarity_tol, "a tolerance > 0")
        check(self.balance_tol > 0, "balance_tol", self.balance_tol, "a tolerance > 0")


@dataclass
class AnalysisConfig:
    name: str = "none"
    analyses: List[str] = field(default_factory=list)  # which analyses run (see repcost.analysis.hooks)
    every: int = 0  # run them every k steps during training (0 = only at the end)
    at_end: bool = True
    n_points: int = 10  # points at which Jacobians are taken
    options: Any = field(default_factory=dict)  # per-analysis options (thresholds, centring, …)
    # the critical-point certificate reports on a run, it does not change it: not part of the run's identity
    critical: CriticalOptions = field(default_factory=CriticalOptions, metadata={"identity": False})

    def __post_init__(self):
        check(self.every >= 0, "every", self.every, "an integer >= 0")
        check(self.n_points > 0, "n_points", self.n_points, "a positive integer")


# each tracker (repcost.loggers) and the modules its extra installs: checked here, imported only by a run that uses it
LOGGERS = {"tensorboard": ("tensorboard",), "mlflow": ("mlflow", "sqlalchemy", "alembic"), "wandb": ("wandb",)}


@dataclass
class TrackingConfig:
    """Where logger=mlflow and logger=wandb write (repcost.loggers)."""

    uri: str = "sqlite:///outputs/mlflow.db"  # MLflow tracking URI; a local sqlite store keeps artifacts beside it
    project: str = "repcost"  # W&B project (the sweep `name` is the W&B group and the MLflow experiment)
    mode: str = "offline"  # W&B: offline (`wandb sync` uploads later) or online

    def __post_init__(self):
        check(self.mode in ("offline", "online"), "mode", self.mode, "offline or online")


@dataclass
class TopLevelConfig:
    """The top-level keys beside the model/data/train/analysis sections."""

    seed: int = 0  # initialisation and minibatch order
    device: str = "auto"  # auto | cpu | cuda[:i]; the run's identity holds what it resolves to
    dtype: str = "float64"
    name: str = field(default="default", metadata={"identity": False})  # sweep name
    force: bool = field(default=False, metadata={"identity": False})  # move a run in the way aside and rerun
    experiment: Any = field(default=None, metadata={"identity": False})
    resume: Any = field(default=None, metadata={"identity": False})
    plugins: Any = field(default_factory=list, metadata={"identity": False})  # modules that register families etc.
    logger: Any = field(default="none", metadata={"identity": False})  # none | tensorboard | mlflow | wandb, or a list
    tracking: TrackingConfig = field(default_factory=TrackingConfig, metadata={"identity": False})
    # torch CPU threads: auto (repcost.threads' rule) or an integer >= 1; speed only, not the result
    threads: Any = field(default="auto", metadata={"identity": False})
    # {plugin module: sha256 of its source} of the plugins a run uses, set by repcost-train (repcost.provenance);
    # part of the identity: a plugin edit makes the run stale. Empty (no plugins): the identity is as before
    plugin_sources: Any = field(default_factory=dict)

    def __post_init__(self):
        check(self.seed >= 0, "seed", self.seed, "an integer >= 0")
        check(self.dtype in ("float32", "float64"), "dtype", self.dtype, "float32 or float64")
        check(self.device in ("auto", "cpu") or self.device.startswith("cuda"), "device", self.device,
              "auto, cpu or cuda[:i]")
        check(self.threads == "auto" or type(self.threads) is int and self.threads >= 1, "threads", self.threads,
              "auto or an integer >= 1 (torch CPU threads of the run)")
        names = [] if self.logger is None else [self.logger] if isinstance(self.logger, str) else list(self.logger)
        self.logger = tuple(dict.fromkeys(str(n) for n in names if str(n) != "none"))  # the chosen trackers
        for name in self.logger:
            check(name in LOGGERS, "logger", name, "none, " + ", ".join(LOGGERS) + ", or a list of them")
            check(all(importlib.util.find_spec(m) is not None for m in LOGGERS[name]), "logger", name,
                  f"none, or install the extra: pip install 'repcost[{name}]'")


@dataclass
class RunSpec(TopLevelConfig):
    """A validated run: the top-level keys (`device` resolved: cpu or cuda[:i]; `logger`: the chosen trackers) and
    the typed sections."""

    model: Any = None
    data: Any = None
    train: TrainConfig = field(default_factory=TrainConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)

    @property
    def torch_dtype(self) -> "torch.dtype":  # noqa: F821 (torch loads with the run, not with the config)
        """The training dtype as a torch dtype."""
        import torch

        return getattr(torch, self.dtype)


SECTIONS = ("model", "data", "hydra")  # validated apart from RunSpec: against a registered schema, or by Hydra


def _section(prefix: str, schema: type, node) -> Any:
    """Merge one config section into its schema and build the dataclass (runs __post_init__); prefix "": the
    top-level keys. Its nested sections (a dataclass field, or a list of them) are built first, so that an error
    names its full key."""
    at = f"{prefix}." if prefix else ""
    hints = typing.get_type_hints(schema) if schema.__module__ == __name__ else {}  # (the nested sections are here)
    for name, tp in hints.items():
        sub = node.get(name) if isinstance(node, (dict, DictConfig)) else None
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is list else None
        if dataclasses.is_dataclass(tp) and isinstance(sub, (dict, DictConfig)):
            _section(at + name, tp, sub)
        elif dataclasses.is_dataclass(inner) and isinstance(sub, (list, ListConfig)):
            for i, element in enumerate(sub):
                _section(f"{at}{name}.{i}", inner, element)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
        return OmegaConf.to_object(merged)
    except ConfigError as e:
        raise ConfigError(at + e.key, e.value, e.allowed) from None
    except ConfigKeyError as e:
        names = [f.name for f in dataclasses.fields(schema)]
        hint = did_you_mean(str(e.key), names, at)
        raise ConfigError(f"{at}{e.full_key or e.key}", "<unknown key>",
                          f"keys of {prefix or 'the config'}: {', '.join(names)}{hint}") from None
    except OmegaConfBaseException as e:  # a value of the wrong type: what the key allows, in the schema's words
        key = str(e.full_key or e.key)
        top = key.split(".")[0].split("[")[0]
        allowed = type_allowed(schema, top) if top in {f.name for f in dataclasses.fields(schema)} else None
        raise ConfigError(at + key, e.value if hasattr(e, "value") else None,
                          allowed or str(e).splitlines()[0]) from None


def validate(cfg: DictConfig) -> RunSpec:
    """Validate a composed run config against the schemas; ConfigError on the first problem."""
    load_plugins(cfg)  # the user's model families and datasets register before their names are checked
    spec = _section("", RunSpec, {k: v for k, v in cfg.items() if k not in SECTIONS})  # (train, analysis: built here)
    import torch  # (the run loads it anyway)

    device = spec.device if spec.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    check(not device.startswith("cuda") or torch.cuda.is_available(), "device", device,
          "cpu or auto (no CUDA device on this machine)")
    model, data = (_section(key, registry.get((cfg.get(key) or {}).get("name")).schema, cfg.get(key))
                   for key, registry in (("model", MODELS), ("data", DATASETS)))
    check(spec.train.cuda_graphs != "on" or device.startswith("cuda"), "train.cuda_graphs", "on",
          "auto or off on a CPU run (CUDA graphs need device=cuda)")
    validate_options(spec.analysis)
    spec = dataclasses.replace(spec, device=device, model=model, data=data)
    check_limits(spec)  # seeds a generator takes, sizes this machine can hold: before anything is allocated
    return spec


def validate_options(cfg: AnalysisConfig) -> dict[type, Any]:
    """Check `analysis.analyses` and `analysis.options` against the registered analyses; {options dataclass: its
    instance from `analysis.options`, typed and checked as the dataclass says}.

    Keys are checked against the options of every registered analysis (so one options block can
    serve several presets); values against each analysis's dataclass.
    """
    for name in cfg.analyses:
        ANALYSES.get(name, "analysis.analyses")  # (an unknown name: the line listing the registered ones)
    schemas = {ANALYSES.get(n).schema for n in ANALYSES.names()} - {CriticalOptions}  # its options: analysis.critical
    fields = {s: {f.name for f in dataclasses.fields(s)} for s in schemas}
    given = dict(cfg.options or {})
    for key in given:
        check(any(key in f for f in fields.values()), f"analysis.options.{key}", "<unknown option>",
              "options " + ", ".join(sorted(set().union(*fields.values()))))
    return {s: _section("analysis.options", s, {k: v for k, v in given.items() if k in f}) for s, f in fields.items()}
