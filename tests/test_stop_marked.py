"""Stopping processes by PID (a run's, found by the marker in their environment): SIGTERM, then SIGKILL for what
ignores it, returning once they have ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from simulation import local_run, stop_local_superlink
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


def test_stop_processes_returns_at_once_what_it_may_not_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process of another user (os.kill refused) is not waited for: it comes back as still running."""
    other = subprocess.Popen([sys.executable, "-c", POLITE])
    try:

        def refuse(pid: int, sig: int) -> None:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(local_run.os, "kill", refuse)
        tick = time.monotonic()
        assert stop_processes([other.pid], grace=0.1, timeout=30) == [other.pid]
        assert time.monotonic() - tick < 10 and other.poll() is None
    finally:
        monkeypatch.undo()
        other.kill()
        other.wait()


def test_stop_processes_skips_what_has_already_ended() -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert stop_processes([ended.pid]) == []


def test_stop_local_superlink_exits_1_naming_what_it_could_not_stop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLWR_LOCAL_SUPERLINK_HTTP_API_PORT", "39999")
    monkeypatch.setattr(stop_local_superlink, "local_superlink_pids", lambda port: [4242])
    monkeypatch.setattr(stop_local_superlink, "descendants", lambda pid: [4243])
    monkeypatch.setattr(stop_local_superlink, "stop_engines", lambda pid: None)
    monkeypatch.setattr(stop_local_superlink, "still_running", list)  # both stand-in PIDs run on
    monkeypatch.setattr(stop_local_superlink, "stop_processes", lambda pids: [4243] if pids == [4243, 4242] else pids)
    assert stop_local_superlink.main([]) == 1
    assert capsys.readouterr().err == (
        "could not stop the local SuperLink on port 39999: PID 4243 still running (another user's, or not ending on "
        "SIGKILL)\n"
    )


ENGINE = """#!{python}
import pathlib, signal, sys, time
def stopped(signum, frame):
    pathlib.Path(sys.argv[1]).write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGINT, stopped)
pathlib.Path(sys.argv[1] + ".ready").touch()
time.sleep(60)
"""


def test_stop_engines_interrupts_the_simulation_engine_alone(tmp_path) -> None:
    """A run being stopped: SIGINT reaches ``flwr-simulation`` (so Flower's exit handlers run) while the rest of the
    tree (Ray's daemons, the SuperExec) is left for the stop that follows."""
    engine = tmp_path / "flwr-simulation"
    engine.write_text(ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    parent_code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([{str(engine)!r}, {str(tmp_path / 'got')!r}])\n"
        f"subprocess.Popen([sys.executable, '-c', {POLITE!r}])\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 30
        while len(local_run.descendants(parent.pid)) < 2 or not (tmp_path / "got.ready").exists():
            assert time.monotonic() < deadline, "the stand-in engine never got its handler in place"
            time.sleep(0.05)
        (engine_pid,) = local_run.engine_processes(parent.pid)
        local_run.stop_engines(parent.pid, grace=10)
        assert (tmp_path / "got").read_text() == "SIGINT"
        left = local_run.still_running(local_run.start_times(local_run.descendants(parent.pid)))
        assert engine_pid not in left and len(left) == 1  # the other child runs on
        local_run.stop_engines(parent.pid, grace=10)  # no engine left: returns at once
    finally:
        stop_processes([*local_run.descendants(parent.pid), parent.pid], grace=0.5)
        parent.wait()


def test_stop_local_superlink_answers_help_without_stopping_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--help`` must not act: the module stops a running SuperLink when it runs."""
    looked = []
    monkeypatch.setattr(stop_local_superlink, "local_superlink_pids", lambda port: looked.append(port) or [])
    for argv in (["--help"], ["--port", "1"]):
        with pytest.raises(SystemExit):
            stop_local_superlink.main(argv)
    assert looked == []
    assert "stop the local SuperLink" in capsys.readouterr().out
