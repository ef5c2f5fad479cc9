#!/usr/bin/env bash
# The checks a lent GPU machine runs, in one command, each stage under its own time limit, logs in $OUT (or ./gpu-out):
#   1. the device tests on CUDA (tests/test_device.py, the batched-cohort tests), 2. batched cohorts against one
#   client at a time on the GPU (python -m benchmarks gpu-round: a round's local SGD, then whole in-process runs),
#   with channels-last scoring against NCHW on the GPU between them (python -m benchmarks scoring-layout), 3. the
#   whole suite, as far as the time left allows.
# Where flwr does not import (a machine without it: its wheels and this repository do not fit together in what a
# lent machine is sent), only the parts that need torch alone run: the cohort-training tests and benchmark.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
python=${PYTHON:-python3}

stage() {  # stage NAME SECONDS COMMAND...: run COMMAND under a limit, its output in $out/NAME.txt, its time noted
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.txt" 2>&1
    local code=$?
    echo "$name: exit $code after $((SECONDS - start)) s (limit $limit s)" | tee -a "$out/stages.txt"
    tail -n 4 "$out/$name.txt"
}

{ nvidia-smi -L; "$python" -c "import torch; print('torch', torch.__version__)"; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
if ! "$python" -c "import flwr" 2>/dev/null; then
    echo "flwr does not import here: torch-only checks" | tee -a "$out/stages.txt"
    stage cohort-tests "${DEVICE_TESTS_SECONDS:-150}" "$python" -m pytest -q -p no:cacheprovider --noconftest \
        tests/test_cohort_training.py
    stage cohort-training "${TRAINING_SECONDS:-240}" "$python" -m benchmarks gpu-round --device cuda \
        --parts cohort-training --pairs "${PAIRS:-5}" --out "$out/batched_cohorts_training.json"
    exit 0
fi
stage device-tests "${DEVICE_TESTS_SECONDS:-150}" "$python" -m pytest -q -p no:cacheprovider -n 8 \
    tests/test_cohort_training.py tests/test_batched_cohorts.py tests/test_device.py tests/test_memory_layout.py
stage scoring-layout "${LAYOUT_SECONDS:-60}" "$python" -m benchmarks scoring-layout --device cuda --images 10000 \
    --repeats 5 --out "$out/scoring_layout_cuda.json"
if [ "${TRAINING_SECONDS:-110}" != 0 ]; then
    stage cohort-training "${TRAINING_SECONDS:-110}" "$python" -m benchmarks gpu-round --device cuda \
        --parts cohort-training --pairs 3 --out "$out/batched_cohorts_training.json"
fi
stage cohort-runs "${RUNS_SECONDS:-160}" "$python" -m benchmarks gpu-round --device cuda --parts cohort-runs \
    --dataset fashion-mnist-mini --clients 10 --per-round 10 --rounds 6 --pairs 2 --model lenet5 wrn-16-1 \
    --out "$out/batched_cohorts_runs.json"
stage suite "${SUITE_SECONDS:-120}" "$python" -m pytest -v -p no:cacheprovider -n 14 tests
grep -c " PASSED" "$out/suite.txt" | sed 's/^/suite passed: /' | tee -a "$out/stages.txt"
grep " FAILED\| ERROR" "$out/suite.txt" | sed 's/^.*\] //' | sort | uniq >"$out/suite-failures.txt"
wc -l <"$out/suite-failures.txt" | sed 's/^/suite failed or errored: /' | tee -a "$out/stages.txt"
