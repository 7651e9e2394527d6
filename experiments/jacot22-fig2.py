"""Jacot, Golikov, Hongler, Gabriel 2022, Fig 2: the loss plateau against width (L = 3).

Left: MNIST (N = 1000 in the paper), cross-entropy, two values of λ. Right: teacher data
(N = 1000 Gaussian inputs, teacher depth 3 width 10), MSE with λ = 1e-6, best of 3 trials per width
(train.ensemble_size = 3; every trial is drawn as a dot). Full lines: train objective (data loss +
λ‖θ‖²); dashed: test loss (no regulariser). The start of the plateau is the smallest width from
which every wider net's train objective is within REL_TOL of the best over all widths (and, second rule,
within LOG_FRAC of the curve's log-scale range of the best). Widths whose objective is above a narrower
width's by more than FAIL_TOL are reported as not at their minimum (a zero-padded narrower net matches
it), with the plateau start recomputed without them.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from repcost.analysis.alignment import optimisation_failures, plateau_start
from repcost.figures import figure_args, is_full, run_figure, save_figure, sweep_for, width_curve
from repcost.plots.jacot22 import plateau_figure

FIG = "jacot22-fig2"
REL_TOLS = (0.05, 0.01)
FAIL_TOL = 0.05  # a width whose objective is 5 % above a narrower width's has not reached its minimum
LOG_FRAC = 0.05  # log-scale rule: within 5 % of the curve's log range of the best (how the paper's log plot reads)


def _starts(w, obj) -> dict:
    """Plateau starts by each rule: {'0.05': …, '0.01': …, 'log0.05': …}."""
    return {**{f"{t:g}": plateau_start(w, obj, t) for t in REL_TOLS}, f"log{LOG_FRAC:g}": plateau_start(w, obj, log_frac=LOG_FRAC)}


def main():
    args = figure_args(__doc__.splitlines()[0]).parse_args()
    mnist = sweep_for(FIG, args)
    teacher = sweep_for(f"{FIG}-teacher", args)
    out_rows, left, right, claims = [], [], [], []
    for lam in sorted({float(r["train.lam"]) for r in mnist}, reverse=True):
        rs, w, obj, _, _ = width_curve([r for r in mnist if float(r["train.lam"]) == lam])
        left += [dict(widths=w, values=obj, label=f"train objective, λ={lam:g}"),
                 dict(widths=w, values=[float(r["test_loss"]) for r in rs], style="--", label=f"test loss, λ={lam:g}")]
        starts = _starts(w, obj)
        claims.append(("MNIST", lam, starts, w, obj))
        out_rows += [{"panel": "mnist", "lam": lam, "width": wi, "objective": o, "train_loss": float(r["train_loss"]),
                      "test_loss": float(r["test_loss"]), "wall_time_s": float(r["wall_time_s"]),
                      **{f"plateau_start_{k}": v for k, v in starts.items()}} for wi, o, r in zip(w, obj, rs)]
    rs, w, obj, tw, tv = width_curve(teacher)
    lam = float(teacher[0].get("train.lam") or 1e-6) if "train.lam" in teacher[0] else 1e-6
    right += [dict(widths=w, values=obj, label="train objective (best of trials)", trials=(tw, tv)),
              dict(widths=w, values=[float(r["test_loss"]) for r in rs], style="--", label="test loss (best trial)")]
    starts = _starts(w, obj)
    claims.append(("teacher", lam, starts, w, obj))
    out_rows += [{"panel": "teacher", "lam": lam, "width": wi, "objective": o, "train_loss": float(r["train_loss"]),
                  "test_loss": float(r["test_loss"]), "wall_time_s": float(r["wall_time_s"]),
                  "trial_objectives": " ".join(f"{v:.6g}" for ww, v in zip(tw, tv) if ww == wi),
                  **{f"plateau_start_{k}": v for k, v in starts.items()}} for wi, o, r in zip(w, obj, rs)]
    n_m, n_t = (OmegaConf.load(Path(r[0]["path"]) / ".hydra" / "config.yaml").data.n_train for r in (mnist, teacher))
    mode = {p: "full" if is_full(args, p) else "quick" for p in (FIG, f"{FIG}-teacher")}
    fig = plateau_figure([
        dict(series=left, title=f"MNIST ({mode[FIG]}: N = {n_m}), cross-entropy, L = 3", ylabel="loss"),
        dict(series=right, title=f"teacher ({mode[FIG + '-teacher']}: N = {n_t}; depth 3, width 10), MSE, λ = {lam:g}",
             ylabel="loss")])
    save_figure(fig, FIG, out_rows, args)
    print("paper (Fig 2): in both settings the plateau starts around width 10, far below N² = 10⁶.")
    for name, lam, st, w, obj in claims:
        curve = ", ".join(f"{wi}: {o:.4g}" for wi, o in zip(w, obj))
        print(f"measured {name} ({mode[FIG if name == 'MNIST' else FIG + '-teacher']}) λ={lam:g}: plateau start (objective within 5% of best) = {st['0.05']}, "
              f"(within 1%) = {st['0.01']}, (within {LOG_FRAC:g} of the log range) = {st[f'log{LOG_FRAC:g}']}; "
              f"objective by width {{{curve}}}")
        bad = optimisation_failures(w, obj, FAIL_TOL)
        if bad:
            kept = _starts(*zip(*[(wi, o) for wi, o in zip(w, obj) if wi not in bad]))
            print(f"   not at their minimum (objective > {1 + FAIL_TOL:g}x a narrower width's, which zero-padding "
                  f"matches): widths {bad}; without them the plateau starts at {kept['0.05']} (5%), {kept['0.01']} (1%)")


if __name__ == "__main__":
    run_figure(main)
