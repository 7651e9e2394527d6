"""K seeds trained as one stacked model (train.ensemble_size=K) against K single runs one after another.

Setting (issue: stacked ensembles): K = 8 seeds of fc, L = 3, width 10 (--width), on MNIST
N = 1000 with cross-entropy, full-batch Adam, float32, metrics every 100 steps. Both sides
run repcost's own code in one process: one `Engine` over the K models against K one-model engines
on each model in turn (model building and data loading are outside the timed part). They
alternate in rounds, so machine noise hits both; the script prints every round, the best of
each side, the best-round and median-round speed-ups, and checks that the members' final
objectives agree with the single runs'.
Targets: >= 1.5x on a 2-core CPU; >= 4x with `--width 50 --device cuda`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from repcost.config import compose_config, validate
from repcost.data import load_data
from repcost.models import build_model
from repcost.train.engine import Engine


def overrides(a) -> list[str]:
    data = ["data=mnist", f"data.n_train={a.n_train}", "data.n_test=0", "data.task=classification"]
    if a.data == "teacher":  # a stand-in that needs no MNIST files
        data = ["data=teacher", f"data.n_train={a.n_train}", "data.n_test=0", "data.widths=[784,10,10,10]"]
    return ["model=fc", "model.depth=3", f"model.width={a.width}", *data,
            f"train.loss={'cross_entropy' if a.data == 'mnist' else 'mse'}", f"train={a.optimizer}",
            f"train.phases.0.lr={a.lr}", "train.log_every=100", "train.progress=false",
            "dtype=float32", f"device={a.device}"]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Bench:
    def __init__(self, a):
        self.a = a
        self.spec = validate(compose_config(overrides(a)))
        self.data = load_data(self.spec.data).to(torch.float32, a.device)

    def models(self, steps: int):
        self.spec.train.phases[0].steps = steps
        return [build_model(self.spec.model, self.data.d_in, self.data.d_out, s).to(self.a.device, torch.float32)
                for s in range(self.a.k)]

    def stacked(self, steps: int) -> tuple[float, list[float]]:
        """Seconds for one stacked Engine run of K members; their final objectives."""
        models, logs = self.models(steps), []
        et = Engine(models, self.data, [self.spec.train] * self.a.k, list(range(self.a.k)),
                    on_logs=[logs.append] * self.a.k)
        sync(self.a.device)
        t = time.perf_counter()
        et.run()
        sync(self.a.device)
        dt = time.perf_counter() - t
        return dt, [tr.evaluate()["objective"] for tr in et.members]

    def sequential(self, steps: int) -> tuple[float, list[float]]:
        """Seconds for K one-model Engine runs one after another; their final objectives."""
        models, logs, dt, objs = self.models(steps), [], 0.0, []
        for s, m in enumerate(models):
            tr = Engine([m], self.data, [self.spec.train], [s], on_logs=[logs.append])
            sync(self.a.device)
            t = time.perf_counter()
            tr.run()
            sync(self.a.device)
            dt += time.perf_counter() - t
            objs.append(tr.members[0].evaluate()["objective"])
        return dt, objs


def main() -> None:
    """Alternate the stacked ensemble and K sequential runs; print times, speed-ups and agreement."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8, help="ensemble size (seeds 0 … k-1)")
    ap.add_argument("--width", type=int, default=10, help="hidden width of the fc net (L = 3)")
    ap.add_argument("--steps", type=int, default=300, help="training steps per timed run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "gd"], help="full-batch optimiser")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--data", default="mnist", choices=["mnist", "teacher"], help="teacher: no MNIST needed")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave as is)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device on this machine")
    b = Bench(a)
    print(f"K={a.k} fc L=3 width={a.width} {a.data} N={a.n_train} {a.optimizer} float32 {a.device} "
          f"threads={torch.get_num_threads()} steps={a.steps}", flush=True)
    b.stacked(10), b.sequential(10)  # warm-up (first optimiser step, lazy imports, kernels)
    st, sq, ratios = [], [], []
    for r in range(a.rounds):
        (t_st, o_st), (t_sq, o_sq) = b.stacked(a.steps), b.sequential(a.steps)
        st.append(t_st), sq.append(t_sq), ratios.append(t_sq / t_st)
        dev = max(abs(x - y) / abs(y) for x, y in zip(o_st, o_sq))
        print(f"round {r}: stacked {t_st:.3f} s, sequential {t_sq:.3f} s, speed-up {t_sq / t_st:.2f}x "
              f"(members vs single runs: max rel. objective difference {dev:.1e})", flush=True)
    print(f"stacked:    best {min(st):.3f} s  ({a.k * a.steps / min(st):.0f} member-steps/s)")
    print(f"sequential: best {min(sq):.3f} s  ({a.k * a.steps / min(sq):.0f} member-steps/s)")
    print(f"speed-up: best-of-each {min(sq) / min(st):.2f}x, rounds min/median/max "
          f"{min(ratios):.2f}/{statistics.median(ratios):.2f}/{max(ratios):.2f}x "
          f"(target >= {4 if a.device.startswith('cuda') else 1.5}x)")


if __name__ == "__main__":
    main()
