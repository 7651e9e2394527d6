"""Pure analysis functions (model or arrays in, arrays or numbers out), float64 throughout.

Spectra and ranks (Jacot 2023 Fig 1), Jacobians (Prop 3), balancedness (Prop 12, Savarese
Cor C.2), representation costs and bounds (Ongie & Willett §3, Savarese §3 and App. C), the
Jacot et al. 2022 reformulation, forces, neuron alignment and plateau tools, and the exact
minimum of R2 on 1-D/2-D data by the convex program of Pilanci & Ergen 2020.

scipy and cvxpy load inside the functions that solve with them, so importing the package loads neither.
"""

from .alignment import (identity_input_lower_bound, identity_input_min_cost, merge_units,
                        neuron_groups, optimisation_failures, plateau_start)
from .convex_relu import min_r2_interpolant
from .costs import (active_subnetworks, cost_CL, effective_matrix, l2L_quasinorm, parallel_alpha_normalised,
                    parallel_balance, path_norm, phi3_lower_bound, phi3_upper_bound, phi_L)
from .critical import balance_summary, layer_balance, linear_layer_balance, neuron_balance
from .reformulation import layer_forces, reformulated_loss
from .relu_1d import deep_relu_net_1d_function, linear_spline_interpolant, spline_min_cost
from .spectra import (entropy_rank, hidden_spectra, jacobian_spectra, jacobians, normalised, numerical_rank,
                      prop3_bound, schatten_cost, singular_values, stable_rank, weight_spectra)
