"""Certificate keys under their names, for run directories written with the earlier ones.

The critical-point certificate (analysis/critical.py, a local statement) is configured under `analysis.critical`
(its balance tolerance `balance_tol`) and reports `critical.*`; the duality gap, the global certificate's number
(`train.certify`), is reported as `certify.*`. A run directory written with `analysis.certificate` (balance
tolerance `gap_tol`) and `cert.*` stays as it is: its readers (run loading, reanalysis, `--resume`, collect)
map the keys here, and neither name is part of a run's identity.
"""

from __future__ import annotations

GAP_FIELDS = ("dual_value", "duality_gap", "duality_gap_rel", "dual_violation")  # reported as certify.*


def certificate_key(field: str) -> str:
    """A critical-point certificate field's summary key: `certify.X` for the duality gap, `critical.X` for the rest."""
    return f"{'certify' if field in GAP_FIELDS else 'critical'}.{field}"


def _summary_key(key: str) -> str:
    return certificate_key(key.removeprefix("cert.")) if key.startswith("cert.") else key


def summary_keys(summary: dict) -> dict:
    """summary.json's scalars with `cert.X` as `certify.X` (the duality gap) or `critical.X` (the rest)."""
    out = {_summary_key(k): v for k, v in summary.items()}
    if isinstance(out.get("not_applicable"), dict):
        out["not_applicable"] = {_summary_key(k): v for k, v in out["not_applicable"].items()}
    return out


def config_keys(cfg: dict) -> dict:
    """A run config (a plain dict) with `analysis.certificate` as `analysis.critical` (`gap_tol` as `balance_tol`)."""
    analysis = cfg.get("analysis")
    if not isinstance(analysis, dict) or "certificate" not in analysis:
        return cfg
    analysis = dict(analysis)
    options = dict(analysis.pop("certificate") or {})
    if "gap_tol" in options:
        options["balance_tol"] = options.pop("gap_tol")
    analysis.setdefault("critical", options)
    return {**cfg, "analysis": analysis}


def override(text: str) -> str:
    """One saved command-line override with its key under today's name."""
    key = text.lstrip("+~")  # after the override's prefix (+, ++ or ~)
    for old, new in (("analysis.certificate.gap_tol", "analysis.critical.balance_tol"),
                     ("analysis.certificate", "analysis.critical")):
        if key.startswith(old):
            return text[:len(text) - len(key)] + new + key[len(old):]
    return text
