"""Pure analysis functions (model or arrays in, arrays or numbers out), float64 throughout.

Spectra and ranks (Jacot 2023 Fig 1), Jacobians (Prop 3), balancedness (Prop 12, Savarese
Cor C.2), representation costs and bounds (Ongie & Willett §3, Savarese §3 and App. C), the
Jacot et al. 2022 reformulation, forces, neuron alignment and plateau tools, and the exact
minimum of R2 on 1-D/2-D data by the convex program of Pilanci & Ergen 2020.
"""

from .alignment import (effective_widths, identity_input_lower_bound, identity_input_min_cost, merge_neurons,
                        neuron_groups, optimisation_failures, plateau_start)
from .convex_relu import ConvexR2Result, min_r2_interpolant
from .balance import balance_summary, layer_balance, linear_layer_balance, neuron_balance
from .costs import (cost_CL, effective_matrix, path_norm, phi3_lower_bound, phi3_lower_bound_search,
                    phi3_upper_bound)
from .jacobians import jacobian_rank, jacobian_spectra, jacobians, prop3_bound, schatten_cost
from .forces import layer_forces
from .phi import phi_L
from .reformulation import reformulated_loss
from .sparsity import active_subnetworks, l2L_quasinorm, parallel_alpha_normalised, parallel_balance
from .spectra import (entropy_rank, hidden_spectra, normalised, numerical_rank, singular_values,
                      stable_rank, weight_spectra)
from .splines import linear_spline_interpolant, relu_net_1d_cost, spline_min_cost

__all__ = [
    "ConvexR2Result", "active_subnetworks", "balance_summary", "cost_CL", "effective_matrix", "effective_widths", "entropy_rank",
    "hidden_spectra", "identity_input_lower_bound", "identity_input_min_cost", "jacobian_rank", "jacobian_spectra", "jacobians", "l2L_quasinorm",
    "layer_balance", "layer_forces", "linear_layer_balance", "linear_spline_interpolant", "merge_neurons", "min_r2_interpolant", "neuron_balance",
    "neuron_groups", "normalised", "numerical_rank", "parallel_alpha_normalised", "parallel_balance", "path_norm",
    "optimisation_failures", "phi3_lower_bound", "phi3_lower_bound_search", "phi3_upper_bound", "phi_L", "plateau_start", "prop3_bound",
    "reformulated_loss", "relu_net_1d_cost", "schatten_cost", "singular_values", "spline_min_cost", "stable_rank",
    "weight_spectra",
]
