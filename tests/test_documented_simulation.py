"""The documented `flwr run .` commands (docs/running.md) work exactly as written: Flower's CLI from the virtual
environment, 10 simulated clients, the local SuperLink stopped afterwards by PID."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from simulation.local_run import PROJECT_DIR, free_port
from tests.test_end_to_end import described, processes_using

pytestmark = pytest.mark.e2e


def readme_block(name: str) -> str:
    text = (PROJECT_DIR / "docs" / "running.md").read_text()
    block = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return "\n".join(line for line in block.strip().splitlines() if not line.startswith("```"))


def test_the_readme_flwr_run_commands_run_as_written(tmp_path: Path) -> None:
    commands = readme_block("flwr-run")
    assert "flwr run . " in commands and "num-supernodes=10" in commands
    flwr_home = tmp_path / "flwr-home"
    environment = {
        **os.environ,
        "FLWR_HOME": str(flwr_home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=PROJECT_DIR, env=environment, capture_output=True, text=True, timeout=600
    )
    log = done.stdout + done.stderr
    written = re.search(r"results written to (\S+)", log)
    if written:
        shutil.rmtree(written.group(1), ignore_errors=True)  # the run's folder in the project's results/
    assert done.returncode == 0, log[-3000:]
    assert "10 clients connected" in log and "round 2: accuracy" in log
    assert "stopped the local SuperLink" in log
    left = processes_using(flwr_home)
    assert left == [], f"the local SuperLink (or something it started) is still running: {described(left)}"
