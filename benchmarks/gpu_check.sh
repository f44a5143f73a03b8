#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one go (9 minutes at most), from the repo root:
#
#   bash benchmarks/gpu_check.sh [RESULTS_DIR]
#
# (a) the CUDA tests (they skip where no GPU is), (b) the learner alone on cuda: samples/s
# with batch staging on vs off and the copy time hidden behind compute, (c) a short PPO and
# a short APPO run on cuda. Every step runs under `timeout` within one time budget; a failing
# step does not stop the others, and the exit status is non-zero if any failed. The bench
# JSON and the runs' folders go to RESULTS_DIR (default: a new temporary folder).
set -u
cd "$(dirname "$0")/.." || exit 2

BUDGET_S=${GPU_CHECK_BUDGET_S:-540}  # every step together
RESULTS=${1:-$(mktemp -d -t fastrl-gpu-check-XXXXXX)}
mkdir -p "$RESULTS" || exit 2
start=$SECONDS
failed=()

if [ ! -x .venv/bin/python ]; then
    echo "== no .venv here: creating it (README.md: pip install -c constraints.txt -e \".[test]\")"
    # --system-site-packages: a CUDA build of torch already on the machine is used as it is
    if ! { python3 -m venv --system-site-packages .venv &&
           .venv/bin/pip install -c constraints.txt -e ".[test]"; }; then
        echo "gpu_check: could not install fastrl and its test dependencies into .venv" >&2
        exit 2
    fi
fi
# shellcheck disable=SC1091
. .venv/bin/activate

echo "== torch and the GPU"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader
if ! python - <<'EOF'
import sys

import torch

print(f"torch {torch.__version__} (built for CUDA {torch.version.cuda}), "
      f"torch.cuda.is_available(): {torch.cuda.is_available()}")
if not torch.cuda.is_available():
    sys.exit("gpu_check: torch sees no CUDA device: this machine needs an NVIDIA GPU and a CUDA "
             "build of torch (the CPU wheel of constraints.txt cannot use one); nothing was run")
print(f"device: {torch.cuda.get_device_name(0)}")
EOF
then
    exit 3
fi

# step NAME LIMIT_S COMMAND...: run COMMAND under `timeout`, at most LIMIT_S seconds and no
# more than what is left of the budget; remember a failure and go on.
step() {
    local name=$1 limit=$2 left rc
    shift 2
    left=$(( BUDGET_S - (SECONDS - start) ))
    (( limit > left )) && limit=$left
    echo
    echo "======== $name (at most ${limit} s) ========"
    if (( limit < 10 )); then
        echo "NOT RUN: the ${BUDGET_S} s budget is spent"
        failed+=("$name: not run, out of time")
        return
    fi
    printf '+'; printf ' %q' "$@"; echo
    timeout --kill-after=15 "$limit" "$@"
    rc=$?
    if (( rc == 124 || rc == 137 )); then
        failed+=("$name: timed out after ${limit} s")
    elif (( rc != 0 )); then
        failed+=("$name: exit status $rc")
    else
        echo "-------- $name: ok ($(( SECONDS - start )) s so far)"
    fi
}

step "(a) CUDA tests" 150 \
    python -m pytest -q -k "cuda or gpu or staging" tests/
step "(b) learner alone on cuda: staging on vs off, copy time hidden behind compute" 150 \
    python -m fastrl.bench --scenario learner --repeats 3 --duration 3 --peers "" \
    --no-plot --out "$RESULTS/bench"
step "(c) PPO on cuda, 100k steps" 240 \
    python -m fastrl.train configs/cartpole_ppo.yaml infra.device=cuda log.console=false \
    algo.total_steps=100000 "log.run_dir=$RESULTS/runs"
step "(c) APPO on cuda, 100k steps" 240 \
    python -m fastrl.train configs/cartpole_ppo.yaml infra.device=cuda log.console=false \
    algo.total_steps=100000 algo.name=appo "log.run_dir=$RESULTS/runs"

echo
echo "======== summary ($(( SECONDS - start )) s; results in $RESULTS) ========"
if (( ${#failed[@]} )); then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "every step passed"
