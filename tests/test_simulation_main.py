"""``python -m simulation``: the checks run with the app's modules, then the same process supervises the run without
torch (``simulation/__main__.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from simulation.local_run import PROJECT_DIR
from tests.test_end_to_end import processes_using


def imports_torch(module: str) -> bool:
    """Whether importing ``module`` in a fresh interpreter imports torch."""
    code = f"import sys, {module}; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


def test_the_supervising_process_imports_no_torch_and_the_checks_do() -> None:
    assert not imports_torch("simulation.__main__")
    assert imports_torch("run_config.overrides")  # what ``check`` imports: the test above can fail


def _cmdline(pid: int) -> list[str]:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode().split("\0")


def _maps(pid: int) -> str:
    return (Path("/proc") / str(pid) / "maps").read_text()


def start_launcher(tmp_path: Path, rounds: int) -> subprocess.Popen:
    """``python -m simulation`` with 2 LeNet-5 FedAvg clients from random weights, results in ``tmp_path/results/main``;
    every process it starts inherits a marker naming ``tmp_path`` (see ``processes_using``)."""
    run_config = (
        f"method='fedavg' pretrain='none' model='lenet5' num-server-rounds={rounds} local-epochs=1 partitioner='iid' "
        f"results-dir='{tmp_path / 'results'}' run-name='main' node-wait-seconds=60.0"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "simulation", "--num-supernodes", "2", "--run-config", run_config],
        cwd=PROJECT_DIR,
        env={**os.environ, "FEDFT_TEST_MARKER": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.e2e
def test_python_m_simulation_runs_under_the_same_pid_without_torch(tmp_path: Path) -> None:
    launcher = start_launcher(tmp_path, rounds=1)
    try:
        deadline = time.monotonic() + 120
        while "--checked" not in _cmdline(launcher.pid):
            assert launcher.poll() is None, launcher.communicate()[0].decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the launcher never handed over to the supervising process"
            time.sleep(0.05)
        supervising_maps = _maps(launcher.pid)
        output, _ = launcher.communicate(timeout=400)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    log = output.decode(errors="replace")
    assert launcher.returncode == 0, log[-3000:]
    assert "libtorch" not in supervising_maps
    assert (tmp_path / "results" / "main" / "summary.json").is_file()
    assert processes_using(tmp_path) == [], "a SuperLink, SuperExec or Ray process was left running"


@pytest.mark.e2e
def test_a_stopped_run_says_interrupted_holds_its_rounds_and_leaves_nothing_running(tmp_path: Path) -> None:
    """SIGTERM to ``python -m simulation`` mid-run (what ``kill`` or a scheduler's time limit does): the run's
    summary.json says ``interrupted``, and it, rounds.jsonl and the checkpoint hold the same rounds."""
    run = tmp_path / "results" / "main"
    launcher = start_launcher(tmp_path, rounds=50)
    try:
        deadline = time.monotonic() + 300
        while not (run / "rounds.jsonl").is_file() or len((run / "rounds.jsonl").read_text().splitlines()) < 2:
            assert launcher.poll() is None, launcher.communicate()[0].decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the run never finished two rounds"
            time.sleep(0.1)
        launcher.send_signal(signal.SIGTERM)
        output, _ = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    log = output.decode(errors="replace")
    assert launcher.returncode == 128 + signal.SIGTERM, log[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    rounds = summary["rounds"]
    assert summary["status"] == "interrupted" and 2 <= rounds < 50, log[-3000:]
    assert len((run / "rounds.jsonl").read_text().splitlines()) == rounds
    assert torch.load(run / "checkpoint.pt", weights_only=False)["server_round"] == rounds
    assert processes_using(tmp_path) == [], "a SuperLink, SuperExec or Ray process was left running"
