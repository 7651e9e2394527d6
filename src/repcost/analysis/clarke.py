"""Clarke stationarity at ReLU kinks: the least gradient norm over the slopes a kink may take.

Where a minimiser puts pre-activations exactly on the ReLU kink (1-D min-norm interpolants put
their kinks on data points, Savarese et al. 2019 Thm 3.3; weight decay zeroes inactive units'
pre-activations), the objective is not differentiable and the gradient autograd returns (slope 0
at z = 0, 1 just above) need not vanish at the minimum. What vanishes there is the least-norm
element of the set of gradients obtained by letting each kinked pre-activation's slope range over
[a, 1] (a: the leaky slope, 0 for ReLU), the chain-rule (conservative) set that contains the Clarke
subdifferential (Bolte & Pauwels 2020, "Conservative set valued fields, automatic differentiation,
stochastic gradient methods and deep learning").

A pre-activation counts as kinked when |z| ≤ `KINK_TOL` × the largest |z| of its unit over the
data: a Goldstein-style ε-relaxation, since a float minimiser puts its kinks on data points only to
round-off. The gradient G(s) is affine in each slope s_j separately (exactly affine for one hidden
ReLU layer, multilinear across layers), so its columns ∂G/∂s_j = G(s₀ + e_j) − G(s₀) are exact;
the slopes minimising ‖G(s₀) + J(s − s₀)‖ in the box come from bounded least squares
(scipy's BVLS), and the value reported is ‖G(s*)‖ evaluated at those slopes, so it is attained by
an element of the set: an upper bound on its least norm (exact for one hidden layer). With kinks in several layers
the columns hold only at s₀, and the matrix-free solve below continues from BVLS's slopes (docs/recipes-and-certificates.md).

Beyond `EXACT_KINKS` kinks, unless the columns hold at most `EXACT_ENTRIES` numbers (a small net: the 1-D
recipe's width-400 net at 350 kinks), they would not fit in memory (a deep net at a minimum has thousands),
so ½‖G(s)‖² is minimised over the box directly by scipy's L-BFGS-B, its gradient in s by double
backpropagation: matrix-free, and again evaluated at the slopes it returns, so still attained.

A kink whose activation receives an exactly zero backward signal ∂obj/∂out (a unit weight decay has
cut off, with its outgoing weights at 0) has a zero column, since ∂G/∂s_j = (∂obj/∂out_j)·∇z_j: such
kinks are left out (neither counted nor solved for). A dead unit is kinked at every data point: in
the Jacot 2023 Fig 1 net they are 49 500 of 54 300 kinks.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..objective import objective

KINK_TOL = 1e-5  # relative to the unit's largest |z|: float32 training puts kinks on data points to ~1e-6
EXACT_KINKS = 256  # up to this many: exact Jacobian columns, one gradient evaluation each
EXACT_ENTRIES = 2 ** 24  # or while the columns hold at most this many numbers (128 MB)
MAX_KINKS = 200_000  # beyond: not computed (between: matrix-free L-BFGS-B)
MAX_ITER = 300  # L-BFGS-B iterations of the matrix-free solve


class Slopes(TorchFunctionMode):
    """ReLU / leaky ReLU calls with the kinked entries' slopes taken from `slopes` (None: find the kinks), or (with
    `widths`, per call one per unit, train/polish.py) every kink smoothed: a·z + (1 − a)·d·softplus(z/d)."""

    def __init__(self, masks: list | None = None, slopes: torch.Tensor | None = None, pieces: bool = False,
                 widths: list | None = None):
        super().__init__()
        self.masks, self.slopes, self.pieces = masks, slopes, pieces  # pieces: masked entries output s·z (smooth)
        self.widths, self.scales = widths, []  # scales (finding): per call, each unit's largest |z| over the data
        self.found: list[tuple[torch.Tensor, float]] = []  # per call: kink mask, lower slope
        self.inputs: list[torch.Tensor] = []  # per call: the pre-activations (on the graph if any)
        self.outputs: list[torch.Tensor] = []  # per call (with masks): the activation's output
        self.at = 0  # slopes taken so far

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.relu, F.relu, torch.Tensor.relu):
            z, lo = args[0], 0.0
        elif func is F.leaky_relu:
            z = args[0]
            lo = float(args[1] if len(args) > 1 else kwargs.get("negative_slope", 0.01))
        else:
            return func(*args, **kwargs)
        out = F.leaky_relu(z, lo) if lo else torch.relu(z)
        self.inputs.append(z)
        if self.widths is not None:  # a unit of width 0 (removed: z = 0) keeps the activation itself
            d = self.widths[len(self.inputs) - 1]
            return lo * z + (1 - lo) * torch.where(d > 0, d * F.softplus(z / d.clamp_min(1e-300), threshold=30.0),
                                                   torch.relu(z))
        if self.masks is None:
            a = z.detach().abs()
            self.scales.append(a.reshape(-1, a.shape[-1]).amax(0) if a.dim() > 1 else a.amax())
            self.found.append((a <= KINK_TOL * self.scales[-1], lo))
            return out
        mask = self.masks[len(self.outputs)]
        n = int(mask.sum())
        s = torch.zeros_like(z)
        s[mask] = self.slopes[self.at:self.at + n].to(z)  # dtype and device (the slopes come from numpy)
        self.at += n
        kinked = s * z if self.pieces else out.detach() + s * (z - z.detach())
        self.outputs.append(torch.where(mask, kinked, out))
        return self.outputs[-1]


def kinked(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str) -> tuple:
    """(params, masks, lo, G, finder): the trainable parameters, the kink masks per activation call (live kinks only:
    those whose activation output gets a nonzero ∂obj/∂out), per kink in mask order its least slope a (its upper one is
    1), G(slopes, create_graph=False), the objective's gradient as one flat tensor with the kinks at those slopes
    (differentiable in `slopes` with create_graph), and the `Slopes` finder that ran model(x): per activation call its
    pre-activations on the graph (`inputs`) and its kink mask with the least slope (`found`)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def run(masks, slopes) -> tuple[torch.Tensor, Slopes]:
        mode = Slopes(masks, slopes)
        with torch.enable_grad(), mode:
            return objective(model, x, y, loss, lam, reg_scale)[0], mode

    finder = Slopes()
    with torch.enable_grad(), finder:
        model(x)
    masks = [m for m, _ in finder.found]

    def lower_slopes() -> np.ndarray:
        return np.array([lo for m, (_, lo) in zip(masks, finder.found) for _ in range(int(m.sum()))], dtype=np.float64)

    if any(bool(m.any()) for m in masks):
        obj, mode = run(masks, torch.tensor(lower_slopes()))
        if all(o.requires_grad for o in mode.outputs):  # else (an activation of the inputs alone): keep every kink
            signal = torch.autograd.grad(obj, mode.outputs, allow_unused=True)
            masks = [m if d is None else m & (d != 0) for m, d in zip(masks, signal)]

    def G(slopes: torch.Tensor, create_graph: bool = False) -> torch.Tensor:
        grads = torch.autograd.grad(run(masks, slopes)[0], params, create_graph=create_graph, materialize_grads=True)
        return torch.cat([g.reshape(-1) for g in grads])  # one flat tensor (zeros where a parameter is unused)

    return params, masks, lower_slopes(), G, finder


def _least_norm_matrix_free(G, s0: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Slopes in [lo, 1] that (locally) minimise ‖G(s)‖², by L-BFGS-B with autograd's gradient in s."""
    from scipy.optimize import minimize  # scipy loads where kinks need it, not with the certificate

    scale = 1.0

    def f(s: np.ndarray) -> tuple[float, np.ndarray]:  # ‖G(s)‖² / ‖G(s0)‖²: L-BFGS-B's tolerances are absolute
        st = torch.tensor(s, dtype=torch.float64, requires_grad=True)
        with torch.enable_grad():
            g = G(st, create_graph=True)
            sq = (g * g).sum() / scale
            (ds,) = torch.autograd.grad(sq, st)
        return float(sq.detach()), ds.detach().numpy()

    scale = f(s0)[0] or 1.0

    res = minimize(f, s0, jac=True, method="L-BFGS-B", bounds=list(zip(lo, np.ones_like(lo))),
                   options={"maxiter": MAX_ITER, "ftol": 1e-12, "gtol": 1e-10})
    return np.clip(res.x, lo, 1.0)


def clarke_gradient_norm(model, x: torch.Tensor, y: torch.Tensor, loss: str, lam: float, reg_scale: str,
                         max_kinks: int = MAX_KINKS) -> tuple[float, int, bool | None]:
    """(‖G(s*)‖, number of kinks, whether the set is Clarke's): the least gradient norm over the kinks' slopes (module
    docstring).

    `model` is evaluated as it is (the certificate passes its float64 copy, on the CPU). With no
    kinks this is the plain gradient norm; up to `EXACT_KINKS` kinks, or `EXACT_ENTRIES` column entries, it
    solves with exact Jacobian columns, beyond that matrix-free, and with more than `max_kinks` it is NaN (not computed). Kinks
    count only where the activation receives a backward signal (module docstring).

    The third value says whether the set minimised over is the Clarke subdifferential itself (True: all kinks in one
    activation layer, with independent pre-activation gradients ∂z_K/∂θ, so z_K are local coordinates and the convex
    hull of the pieces' gradients is the box of slopes: the regularity condition of Tian & So 2023, "Testing
    stationarity concepts for ReLU networks", for two-layer nets) or may be larger (False: an outer estimate, on which
    a small norm is necessary for Clarke stationarity, not sufficient); None without kinks or beyond `EXACT_KINKS`.
    """
    params, masks, lo, G, finder = kinked(model, x, y, loss, lam, reg_scale)
    n = lo.size
    exact = None
    if 0 < n <= EXACT_KINKS:
        exact = False  # kinks in several activation layers: an outer estimate
        if sum(bool(m.any()) for m in masks) == 1:
            z = torch.cat([zi[m] for zi, m in zip(finder.inputs, masks)])
            J = torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
                zk, params, retain_graph=True, materialize_grads=True)]) for zk in z])
            exact = bool(torch.linalg.matrix_rank(J.double()) == n)
    if n > max_kinks:
        return float("nan"), n, exact

    def gradient(s: np.ndarray) -> np.ndarray:
        return G(torch.tensor(s)).detach().cpu().numpy()

    s0 = lo.copy()  # autograd's own choice at z = 0: 0 for ReLU, the leaky slope otherwise
    g0 = gradient(s0)
    if n == 0:
        return float(np.linalg.norm(g0)), n, exact
    if n > EXACT_KINKS and n * g0.size > EXACT_ENTRIES:
        s = _least_norm_matrix_free(G, s0, lo)
    else:
        # G is affine in each slope alone: a unit step gives the exact partial derivative
        J = np.stack([gradient(np.where(np.arange(n) == j, s0 + 1.0, s0)) - g0 for j in range(n)], axis=1)
        # the least ‖J(s − s0) + g0‖ in the box, by bounded-variable least squares (BVLS: an active-set method that
        # ends on an exact solution of its last active set) on J's reduced QR factor (n rows, not one per parameter)
        from scipy.optimize import lsq_linear  # scipy loads where kinks need it, not with the certificate

        Q, R = np.linalg.qr(J)
        s = np.clip(lsq_linear(R, Q.T @ (J @ s0 - g0), bounds=(lo, np.ones(n)), method="bvls", tol=1e-14).x, lo, 1.0)
        if sum(bool(m.any()) for m in masks) > 1:  # G multilinear across layers: the columns hold only at s0
            s = _least_norm_matrix_free(G, s, lo)
    return float(min(np.linalg.norm(gradient(s)), np.linalg.norm(g0))), n, exact
