"""Every launcher refuses a bad run config in one line naming the key, with exit code 2, before Flower starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import simulation.__main__ as launcher
from simulation.local_run import PROJECT_DIR
from simulation.memory_check import AVAILABLE_ENV

CASES = [
    (
        "temprature=0.5",
        "error: 'temprature' is not a run-config key; did you mean 'temperature' or 'moon.moon-temperature'?",
    ),
    ("temperature=-1", "error: run config 'temperature' = -1.0 is invalid: it must be > 0"),
    ("dataset=fashon-mnist", "error: run config 'dataset' = 'fashon-mnist' is invalid: it must be one of"),
    (
        "client-selection=fedentopt",
        "set 'fraction-train' below 1 (the paper uses 0.1) and 'fedentopt-buffer' to at most 1 − fraction-train",
    ),
    ("num-server-rounds", "error: run config item 'num-server-rounds' is not key=value"),
    ("seed=1 seed=2", "error: run config key 'seed' is given twice ('seed=2' after seed=1)"),
    (
        "data-dir=/tmp/does-not-exist",
        "error: run config 'data-dir' = '/tmp/does-not-exist' is not a folder on this machine: set it to the folder",
    ),
    ("dataset=cifar10", "error: run config 'dataset' = 'cifar10': dataset 'cifar10' not found. Looked for"),
    (
        "min-partition-size=100000",
        "error: run config: min-partition-size = 100000 is impossible: 10 clients x 100000 >",
    ),
    (
        "method=fedkad common.generic-size=5000",
        "error: run config 'common.generic-size' = 5000 asks for more images than the generic source holds: 1200",
    ),
]


@pytest.mark.parametrize(("run_config", "message"), CASES)
def test_the_launcher_names_the_key_in_one_line(
    run_config: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's ``main`` in this process (each ``python -m simulation`` costs seconds of imports); the run
    itself must not start."""
    monkeypatch.setattr(launcher, "run_simulation", lambda *args, **kwargs: pytest.fail("the run started"))
    assert launcher.main(["--run-config", run_config]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err, captured.err
    assert captured.out == ""


def test_python_m_simulation_refuses_in_one_line_with_code_2() -> None:
    """As a process: nothing else on stderr or stdout (no warning at import, no traceback)."""
    run_config, message = CASES[0]
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
    assert done.returncode != 0 and "did you mean 'temperature' or 'moon.moon-temperature'?" in done.stderr
    assert "python -m simulation exited with code 2 (2: settings refused at start;" in done.stderr


def _refused(command: list[str], home: Path) -> subprocess.CompletedProcess:
    """``command`` run with 1,500 MB taken as the machine's available memory and ``home`` as the home folder, so
    that no pretrained weights are cached, as on a fresh machine: the estimate then counts pretraining (``make
    run`` passes the launcher's errors through, as tested above)."""
    return subprocess.run(
        command,
        cwd=PROJECT_DIR,
        env={**os.environ, AVAILABLE_ENV: "1500", "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


#: 10,000 LeNet-5 clients on the mini set, 10 per round, one ClientApp at a time (all CPUs each), in 1,500 MB.
POPULATION = ["--num-supernodes", "10000", "--cpus-per-client", str(os.cpu_count())]
TOO_MANY = "fraction-train=0.001 model='lenet5'"
REFUSAL = (
    "error: this simulation needs about 1.8 GiB at its peak but 1.5 GiB of memory is available (10,000 clients, 10 "
    "per round, 1 ClientApp at once of about 0.25 GiB each; the server 0.45 GiB, the clients' contexts 0.41 GiB, "
    "Flower and Ray 0.70 GiB): lower --num-supernodes (NUM_SUPERNODES) or run config 'fraction-train'; "
    "FEDFT_MEMORY_AVAILABLE_MB replaces the available figure\n"
)


def test_python_m_simulation_refuses_a_population_the_memory_cannot_hold(tmp_path: Path) -> None:
    done = _refused([sys.executable, "-m", "simulation", *POPULATION, "--run-config", TOO_MANY], tmp_path)
    assert done.returncode == 2
    assert done.stderr == REFUSAL, done.stderr
    assert done.stdout == ""
