# repcost: `make demo` sets everything up and runs the default experiment; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
FULL ?=
LAUNCHER ?= parallel
STAMP := $(VENV)/.installed

.PHONY: setup demo data-mnist test test-slow test-all lint test-wheel bench bench-gpu figures clean check-recipes

setup: $(STAMP)

# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build here.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,cluster,tensorboard,convex,mlflow,wandb]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/repcost-train train=certified

# The full MNIST (60,000 + 10,000 digits) as IDX files in $REPCOST_DATA/mnist (default ~/.cache/repcost/mnist),
# for data=mnist data.source=full; a second run is a no-op (docs/data.md)
data-mnist: setup
	$(VENV)/bin/repcost-data fetch mnist

# two pytest workers (pytest-xdist): the suite is mostly single-threaded process start-up and small nets
test: setup
	$(PY) -m pytest -q -n 2

lint: setup
	$(VENV)/bin/ruff check src tests experiments benchmarks

# builds the wheel, installs it in a fresh venv and runs it outside the checkout (about a minute)
test-wheel: setup
	$(PY) -m pytest -q -m slow tests/test_wheel.py

# the slow tests but the wheel's (make test-wheel): end-to-end scenarios, the bad-input suite, held-out recipes
test-slow: setup
	$(PY) -m pytest -q -n 2 -m slow --ignore tests/test_wheel.py

test-all: setup
	$(PY) -m pytest -q -m ''

bench: setup
	$(PY) benchmarks/train_overhead.py
	$(PY) benchmarks/jacobian.py
	$(PY) benchmarks/analysis_overhead.py
	$(PY) benchmarks/ensemble.py
	$(PY) benchmarks/certificate_cost.py
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/threads.py

# Every GPU check and measurement: GPU tests, benchmarks/gpu_loop.py, gpu_stacked.py and the
# full jacot23-fig1 on CUDA, cold and with the compile cache warm (logs under outputs/bench-gpu/).
bench-gpu: setup
	PY=$(PY) FIG1_RUNS=2 bash benchmarks/gpu_all.sh

# Held-out check of the min-norm recipes: 10 unseen datasets per study (1-D: block 300–309), pass rates,
# figures/recipes.csv and figures/recipes.png (repcost.studies.check_recipes).
check-recipes: setup
	MPLBACKEND=Agg $(PY) -m repcost.studies.check_recipes --block 300

clean:
	rm -rf outputs multirun .pytest_cache

# Paper figures: `make fig-<id>` (quick variant; FULL=1 for paper settings; FULL_ONLY=<preset> for one
# sweep of a multi-sweep figure at paper settings; LAUNCHER=stacked|parallel|slurm…), `make figures` for all.
# fig-% runs its sweep with the default launcher unless LAUNCHER is given (make fig-<id> LAUNCHER=stacked)
FIG_LAUNCHER = $(if $(filter command line environment,$(origin LAUNCHER)),--launcher $(LAUNCHER),)
FIGURE_IDS := $(patsubst experiments/%.py,%,$(wildcard experiments/*.py))
figures: setup  # every figure, one line each (verdict, the line behind it, time); logs in figures/quick/
	$(PY) -m repcost.figures.run_all $(if $(FULL),--full,) --launcher $(LAUNCHER)

fig-%: setup
	MPLBACKEND=Agg $(PY) experiments/$*.py $(if $(FULL),--full,) $(if $(FULL_ONLY),--full-only $(FULL_ONLY),) $(FIG_LAUNCHER)

# Launch a figure's sweep on a cluster: `make sweep-<id> LAUNCHER=slurm`
sweep-%: setup
	MPLBACKEND=Agg $(PY) experiments/$*.py $(if $(FULL),--full,) $(if $(FULL_ONLY),--full-only $(FULL_ONLY),) --launcher $(LAUNCHER)

# A single-node SLURM cluster on this machine (root, Debian packages; config in cluster/), and the
# tests that run against it: `make slurm-up && make test-slurm`, then `make slurm-down`.
.PHONY: slurm-up slurm-down test-slurm
slurm-up:
	cluster/slurm.sh up

slurm-down:
	cluster/slurm.sh down

test-slurm: setup
	$(PY) -m pytest -q -m slurm --durations=0 tests/test_slurm.py
