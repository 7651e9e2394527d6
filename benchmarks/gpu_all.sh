#!/usr/bin/env bash
# Every GPU check and measurement in one go (`make bench-gpu`): the GPU tests, the two
# benchmarks and the full jacot23-fig1 on CUDA. Writes logs and JSON to ${OUT:-outputs/bench-gpu}.
# PY picks the interpreter (default .venv/bin/python); each part has its own time limit.
set -u
PY=${PY:-.venv/bin/python}; case $PY in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY");; *) PY=$(command -v "$PY");; esac
OUT=${OUT:-outputs/bench-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
echo "== GPU tests"; t=$SECONDS; TESTSEL=${TESTSEL:-tests/test_gpu.py}
timeout ${T_TESTS:-200} $PY -m pytest -q -p no:cacheprovider -m gpu $TESTSEL 2>&1 | tail -25 | tee "$OUT/tests.log"
echo "tests: $((SECONDS - t)) s"
if [ "${LOOP:-1}" != 0 ]; then
  echo "== gpu_loop"; t=$SECONDS
  (cd benchmarks && timeout ${T_LOOP:-150} $PY gpu_loop.py --steps ${STEPS:-3000} --json "$OUT/gpu_loop.json") 2>&1 | grep -v Warning | tee "$OUT/gpu_loop.log"
  echo "gpu_loop: $((SECONDS - t)) s"
fi
echo "== gpu_stacked"; t=$SECONDS
(cd benchmarks && timeout ${T_STACKED:-170} $PY gpu_stacked.py --steps ${STEPS:-3000} --json "$OUT/gpu_stacked.json") 2>&1 | grep -v Warning | tee "$OUT/gpu_stacked.log"
echo "gpu_stacked: $((SECONDS - t)) s"
# FIG1_RUNS=2: the second run (another work dir, so it trains again) finds the compiled kernels
# in torch's on-disk caches; the first pays the compile of a fresh machine.
for r in $(seq 1 "${FIG1_RUNS:-1}"); do
  echo "== jacot23-fig1 FULL on CUDA, run $r"; t=$SECONDS
  timeout ${T_FIG1:-200} $PY experiments/jacot23-fig1.py --full --set device=cuda --workdir "$OUT/fig1-$r" 2>&1 | grep -v Warning | tail -15 | tee "$OUT/fig1-$r.log"
  find "$OUT/fig1-$r" -name summary.json -exec $PY -c "import json,sys; s=json.load(open(sys.argv[1])); print('fig1 training wall_time_s', s['wall_time_s'], 'steps', s['steps'], 'status', s['status'], 'stationarity', s.get('critical.stationarity'))" {} \;
  echo "fig1 run $r: $((SECONDS - t)) s"
done
