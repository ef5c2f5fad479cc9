"""Stopping processes by PID (a run's, found by the marker in their environment): SIGTERM, then SIGKILL for what
ignores it, returning once they have ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from simulation.local_run import RUN_MARKER, processes_marked, stop_marked, stop_processes

POLITE = "import time; time.sleep(60)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"


def test_sigterm_then_sigkill_after_the_grace() -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, RUN_MARKER: marker}
    polite = subprocess.Popen([sys.executable, "-c", POLITE], env=env)
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], env=env, stdout=subprocess.PIPE)
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline()  # its SIGTERM handler is in place
        assert sorted(processes_marked(marker)) == sorted([polite.pid, stubborn.pid])
        tick = time.monotonic()
        stop_marked(marker, grace=0.5)
        took = time.monotonic() - tick
        assert polite.wait(5) == -15 and stubborn.wait(5) == -9  # SIGTERM ended one; the other needed SIGKILL
        assert 0.5 <= took < 5 and processes_marked(marker) == []
    finally:
        for process in (polite, stubborn):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_stop_processes_returns_once_they_have_ended() -> None:
    polite = subprocess.Popen([sys.executable, "-c", POLITE])
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline()
        stop_processes([polite.pid, stubborn.pid], grace=0.5)
        # Both have ended by the time it returns (zombies waiting for this test to reap them): no waiting needed.
        assert polite.poll() == -15 and stubborn.poll() == -9
    finally:
        for process in (polite, stubborn):
            if process.poll() is None:
                process.kill()
                process.wait()
