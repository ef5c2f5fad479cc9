"""Every launcher refuses a bad run config in one line naming the key, with exit code 2, before Flower starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simulation.local_run import PROJECT_DIR

CASES = [
    (
        "temprature=0.5",
        "error: 'temprature' is not a run-config key; did you mean 'temperature' or 'moon-temperature'?",
    ),
    ("temperature=-1", "error: run config 'temperature' = -1.0 is invalid: it must be > 0"),
    ("dataset=fashon-mnist", "error: run config 'dataset' = 'fashon-mnist' is invalid: it must be one of"),
    (
        "client-selection=fedentopt",
        "set 'fraction-train' below 1 (the paper uses 0.1) and 'fedentopt-buffer' to at most 1 − fraction-train",
    ),
    ("num-server-rounds", "error: run config item 'num-server-rounds' is not key=value"),
]


@pytest.mark.parametrize(("run_config", "message"), CASES)
def test_python_m_simulation_names_the_key_in_one_line(run_config: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulation", "--run-config", run_config],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_make_run_passes_the_error_through(tmp_path) -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "run", "RUN_CONFIG=temprature=0.5"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0 and "did you mean 'temperature' or 'moon-temperature'?" in done.stderr
