"""What a simulation's peak memory is made of: process kinds from command lines, sizes summed per kind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.measured_run import by_kind, simulation_kind


def test_sizes_are_summed_per_kind_largest_first() -> None:
    kinds = ["client actor", "SuperLink", "client actor", "Ray daemons"]
    assert by_kind(kinds, [300, 140, 320, 240]) == {"client actor": 620, "Ray daemons": 240, "SuperLink": 140}
    assert list(by_kind(kinds, [300, 140, 320, 240])) == ["client actor", "Ray daemons", "SuperLink"]


def test_a_process_is_named_by_its_command_line() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ray::ClientAppActor.run"])
    try:
        command_line = Path(f"/proc/{sleeper.pid}/cmdline")
        deadline = time.monotonic() + 10
        while b"ray::" not in command_line.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the child has exec'd: before, it still shows pytest's command line
        assert simulation_kind(sleeper.pid) == "client actor"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert simulation_kind(os.getpid()) == "other"  # pytest
    assert simulation_kind(sleeper.pid) == "gone"
