"""Simulation on an existing Ray cluster: a Ray head started (and stopped, by PID) by the test on loopback, and a
run of the app pointed at it with ``Resources(ray_address=...)`` (``python -m simulation --ray-address``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from simulation.local_run import RUN_MARKER, Resources, free_port, run_simulation, stop_marked, stop_process_tree

pytestmark = pytest.mark.e2e

RAY = Path(sys.executable).parent / "ray"


def test_the_federation_config_carries_gpus_per_client() -> None:
    assert Resources().federation_config(10) == "num-supernodes=10 client-resources-num-cpus=1"
    assert Resources(2, 0.1).federation_config(10) == (
        "num-supernodes=10 client-resources-num-cpus=2 client-resources-num-gpus=0.1"
    )


def _wait_for_head(head: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and head.poll() is None:
        if "Ray runtime started" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"ray start --head did not come up:\n{log.read_text(errors='replace')[-1500:]}")


@pytest.mark.slow_e2e
def test_a_simulation_runs_on_a_running_ray_head(tmp_path: Path) -> None:
    port, marker = free_port(), uuid.uuid4().hex
    head_log = tmp_path / "ray-head.log"
    ray_temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths must stay under 108 bytes
    environment = {**os.environ, RUN_MARKER: marker, "RAY_USAGE_STATS_ENABLED": "0"}
    with head_log.open("wb") as log:
        head = subprocess.Popen(
            [
                str(RAY),
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=2",
                "--include-dashboard=false",
                "--block",
                f"--temp-dir={ray_temp}",
            ],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_head(head, head_log)
        overrides = {
            "dataset": "synthetic",
            "model": "lenet5",
            "pretrain": "none",
            "num-server-rounds": 1,
            "local-epochs": 1,
            "results-dir": str(tmp_path / "results"),
            "run-name": "on-cluster",
            "node-wait-seconds": 60.0,
        }
        home = tmp_path / "flwr-home"
        with (tmp_path / "run.log").open("wb") as run_log:
            code = run_simulation(
                overrides,
                num_supernodes=2,
                resources=Resources(ray_address=f"127.0.0.1:{port}"),
                flwr_home=home,
                stream_to=run_log,
                timeout=300,
            )
        assert code == 0, (tmp_path / "run.log").read_text()[-2000:]
        assert (tmp_path / "results" / "on-cluster" / "summary.json").is_file()
        # The simulation's driver and its ClientApp actors ran on this head: their logs are in its session folder
        # (a private Ray instance would have written to its own).
        logs = [p.name for p in (ray_temp / "session_latest" / "logs").iterdir()]
        assert any(name.startswith("python-core-driver") for name in logs)
        workers = (ray_temp / "session_latest" / "logs").glob("worker-*")
        assert any("ClientAppActor" in path.read_text(errors="replace") for path in workers)
    finally:
        stop_process_tree(head)
        stop_marked(marker)
        shutil.rmtree(ray_temp, ignore_errors=True)
