"""deployment/start-superlink.sh's wait for its SuperLink: a SuperLink that stops during its start (PORT in use) and
one not serving within ``SUPERLINK_START_SECONDS`` are each reported with the log's last lines and exit code 1; a
wait that is not a whole number of seconds is refused before anything starts. The SuperLink here is a stand-in
(``PYTHON`` points at a script that runs the real interpreter for everything but ``-m deployment.gated_superlink``);
the real one starting and serving is tests/test_deployment.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deployment.loopback import SCRIPTS
from simulation.local_run import start_times, still_running, stop_processes

#: The stand-in interpreter: the SuperLink it "starts" logs one line and then stops, or stays without serving.
STAND_IN = """#!/usr/bin/env bash
if [[ "$1 $2" == "-m deployment.gated_superlink" ]]; then
  echo "stand-in superlink: $STAND_IN_SUPERLINK"
  if [[ "$STAND_IN_SUPERLINK" == stops ]]; then echo "ERROR: [Errno 98] Address already in use"; exit 1; fi
  exec sleep 60
fi
exec "{python}" "$@"
"""


def start(tmp_path: Path, behaviour: str, wait_seconds: str = "1") -> subprocess.CompletedProcess[str]:
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(python=sys.executable))
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "STAND_IN_SUPERLINK": behaviour}
    env["SUPERLINK_START_SECONDS"] = wait_seconds
    command = [str(SCRIPTS / "start-superlink.sh"), "--insecure", str(tmp_path / "state"), "-", "127.0.0.1", "9"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_a_superlink_that_stops_during_its_start_is_reported_with_its_log(tmp_path: Path) -> None:
    done = start(tmp_path, "stops", "30")  # returns as soon as the stand-in has stopped
    assert done.returncode == 1, done.stderr
    assert "error: the SuperLink stopped during its start" in done.stderr
    assert "Address already in use" in done.stderr  # the log's last lines
    assert not (tmp_path / "state" / "superlink.pid").exists() and "SuperLink PID" not in done.stdout


def test_a_superlink_not_serving_in_time_is_reported_and_left_running(tmp_path: Path) -> None:
    done = start(tmp_path, "silent")
    pid = int((tmp_path / "state" / "superlink.pid").read_text())
    running = still_running(start_times([pid]))
    stop_processes([pid])
    (tmp_path / "state" / "superlink.pid").unlink()  # stopped: the fixture has nothing left to stop
    assert done.returncode == 1, done.stderr
    assert f"error: the SuperLink (PID {pid}) is not serving after 1 s" in done.stderr
    assert "SUPERLINK_START_SECONDS=300" in done.stderr and "stand-in superlink: silent" in done.stderr
    assert running == [pid] and "SuperLink PID" not in done.stdout


@pytest.mark.parametrize("wait_seconds", ["1.5", "0", "a minute", "1000000"])
def test_a_wait_that_is_not_a_whole_number_of_seconds_is_refused_before_anything_starts(
    tmp_path: Path, wait_seconds: str
) -> None:
    done = start(tmp_path, "silent", wait_seconds)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: SUPERLINK_START_SECONDS must be a whole number of seconds from 1 to 999999: '{wait_seconds}'\n"
    )
    assert not (tmp_path / "state").exists()


@pytest.fixture(autouse=True)
def no_stand_in_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a failed test leaves of its stand-in SuperLink is stopped by PID."""
    yield
    pid_file = tmp_path / "state" / "superlink.pid"
    if pid_file.is_file():
        stop_processes([int(pid_file.read_text())], first=signal.SIGKILL)
