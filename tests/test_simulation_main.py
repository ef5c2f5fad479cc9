"""``python -m simulation``: the checks run with the app's modules, then the same process supervises the run without
torch (``simulation/__main__.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from simulation.__main__ import main as simulation_main
from simulation.local_run import PROJECT_DIR, command_line
from tests.test_end_to_end import processes_using


def imports_torch(module: str) -> bool:
    """Whether importing ``module`` in a fresh interpreter imports torch."""
    code = f"import sys, {module}; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


def test_the_supervising_process_imports_no_torch_and_the_checks_do() -> None:
    assert not imports_torch("simulation.__main__")
    assert imports_torch("run_config.overrides")  # what ``check`` imports: the test above can fail


def _maps(pid: int) -> str:
    return (Path("/proc") / str(pid) / "maps").read_text()


@contextmanager
def launched(tmp_path: Path, rounds: int) -> Iterator[subprocess.Popen]:
    """``python -m simulation`` with 2 LeNet-5 FedAvg clients from random weights, results in ``tmp_path/results/main``;
    every process it starts inherits a marker naming ``tmp_path`` (see ``processes_using``). Killed on the way out if
    it still runs."""
    run_config = (
        f"method='fedavg' pretrain='none' model='lenet5' num-server-rounds={rounds} local-epochs=1 partitioner='iid' "
        f"results-dir='{tmp_path / 'results'}' run-name='main' node-wait-seconds=60.0"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "simulation", "--num-supernodes", "2", "--run-config", run_config]
        + ["--flwr-home", str(tmp_path / "flwr-home")],  # a stopped run keeps its log: here, not in the checkout
        cwd=PROJECT_DIR,
        env={**os.environ, "FEDFT_TEST_MARKER": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        yield launcher
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def wait_for(launcher: subprocess.Popen, done: Callable[[], bool], seconds: float, what: str) -> None:
    """Until ``done()``, failing with the launcher's output if it ends first, or with ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert launcher.poll() is None, launcher.communicate()[0].decode(errors="replace")[-3000:]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_python_m_simulation_runs_under_the_same_pid_without_torch(tmp_path: Path) -> None:
    with launched(tmp_path, rounds=1) as launcher:

        def checked() -> bool:
            return b"--checked" in command_line(launcher.pid)

        wait_for(launcher, checked, 120, "the launcher never handed over to the supervising process")
        supervising_maps = _maps(launcher.pid)
        output, _ = launcher.communicate(timeout=400)
    log = output.decode(errors="replace")
    assert launcher.returncode == 0, log[-3000:]
    assert "libtorch" not in supervising_maps
    assert (tmp_path / "results" / "main" / "summary.json").is_file()
    assert processes_using(tmp_path) == [], "a SuperLink, SuperExec or Ray process was left running"


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_a_stopped_run_says_interrupted_holds_its_rounds_and_leaves_nothing_running(tmp_path: Path) -> None:
    """SIGTERM to ``python -m simulation`` mid-run (what ``kill`` or a scheduler's time limit does): the run's
    summary.json says ``interrupted``, and it, rounds.jsonl and the checkpoint hold the same rounds."""
    rounds_file = tmp_path / "results" / "main" / "rounds.jsonl"
    with launched(tmp_path, rounds=50) as launcher:

        def two_rounds() -> bool:
            return rounds_file.is_file() and len(rounds_file.read_text().splitlines()) >= 2

        wait_for(launcher, two_rounds, 300, "the run never finished two rounds")
        launcher.send_signal(signal.SIGTERM)
        output, _ = launcher.communicate(timeout=120)
    run = rounds_file.parent
    log = output.decode(errors="replace")
    assert launcher.returncode == 128 + signal.SIGTERM, log[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    rounds = summary["rounds"]
    assert summary["status"] == "interrupted" and 2 <= rounds < 50, log[-3000:]
    assert len((run / "rounds.jsonl").read_text().splitlines()) == rounds
    assert torch.load(run / "checkpoint.pt", weights_only=False)["server_round"] == rounds
    assert processes_using(tmp_path) == [], "a SuperLink, SuperExec or Ray process was left running"


def in_process_overrides(tmp_path: Path, extra: str = "") -> str:
    """A two-client, one-round FedAvg from random weights on the synthetic set."""
    return (
        f"dataset='synthetic' model='lenet5' method='fedavg' pretrain='none' num-server-rounds=1 local-epochs=1 "
        f"partitioner='iid' node-wait-seconds=0.0 client-threads=1 results-dir='{tmp_path / 'results'}' "
        f"run-name='here' {extra}"
    )


def test_in_process_runs_the_whole_run_in_this_process(tmp_path: Path) -> None:
    overrides = in_process_overrides(tmp_path)
    assert simulation_main(["--in-process", "--num-supernodes", "2", "--run-config", overrides]) == 0
    summary = json.loads((tmp_path / "results" / "here" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == 1


def test_in_process_says_when_the_run_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    overrides = in_process_overrides(tmp_path, "fail-partitions='0:raise,1:raise'")
    assert simulation_main(["--in-process", "--num-supernodes", "2", "--run-config", overrides]) == 1
    assert "error: the run failed: RunFailedError" in capsys.readouterr().err
    assert json.loads((tmp_path / "results" / "here" / "summary.json").read_text())["status"] == "failed"


@pytest.mark.parametrize(
    ("option", "named"),
    [(["--ray-address", "127.0.0.1:6379"], "--ray-address"), (["--cpus-per-client", "2"], "--cpus-per-client")],
)
def test_in_process_refuses_options_of_flowers_engine(
    option: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        simulation_main(["--in-process", *option])
    assert stopped.value.code == 2
    assert f"{named} set Flower's engine up; --in-process has none" in capsys.readouterr().err


def test_in_process_refuses_a_client_set_to_kill_its_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = in_process_overrides(tmp_path, "fail-partitions='1:die'")
    assert simulation_main(["--in-process", "--num-supernodes", "2", "--run-config", overrides]) == 2
    assert "fail-partitions 'die' kills the client's process" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
