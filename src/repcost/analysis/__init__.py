"""Pure analysis functions (model or arrays in, arrays or numbers out), float64 throughout.

Spectra and ranks (Jacot 2023 Fig 1), Jacobians (Prop 3), balancedness (Prop 12, Savarese
Cor C.2), representation costs and bounds (Ongie & Willett §3, Savarese §3 and App. C), the
Jacot et al. 2022 reformulation, forces, neuron alignment and plateau tools, and the exact
minimum of R2 on 1-D/2-D data by the convex program of Pilanci & Ergen 2020.

Each name loads its module on first use (PEP 562), so importing one analysis (or the package) does not
import scipy, cvxpy and every other analysis's dependencies.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_MODULES = {
    "alignment": ("effective_widths", "identity_input_lower_bound", "identity_input_min_cost", "merge_neurons", "neuron_groups", "optimisation_failures", "plateau_start"),
    "balance": ("balance_summary", "layer_balance", "linear_layer_balance", "neuron_balance"),
    "convex_relu": ("ConvexR2Result", "min_r2_interpolant"),
    "costs": ("cost_CL", "effective_matrix", "path_norm", "phi3_lower_bound", "phi3_lower_bound_search", "phi3_upper_bound"),
    "forces": ("layer_forces",),
    "function_1d": ("relu_net_1d_cost",),
    "jacobians": ("jacobian_rank", "jacobian_spectra", "jacobians", "prop3_bound", "schatten_cost"),
    "phi": ("phi_L",),
    "reformulation": ("reformulated_loss",),
    "sparsity": ("active_subnetworks", "l2L_quasinorm", "parallel_alpha_normalised", "parallel_balance"),
    "spectra": ("entropy_rank", "hidden_spectra", "normalised", "numerical_rank", "singular_values", "stable_rank", "weight_spectra"),
    "relu_1d": ("linear_spline_interpolant", "spline_min_cost"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:  # a submodule not imported yet (`repcost.analysis.hooks`): import it
        if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'repcost.analysis' has no attribute {name!r}")
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
