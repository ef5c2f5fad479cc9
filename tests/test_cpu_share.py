"""benchmarks/cpu_share.py: the slowdown busy processes at a nice value give a thread at nice 0, the busy processes
pinned one per CPU in their cgroup and stopped (by ``close``, or by the kernel when their starter dies), and the
probe's measured slowdown taken as loaded over alone. Each needs a cgroup it may make (Linux, root); elsewhere it is
skipped, saying why."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import cpu_share


def test_the_slowdown_is_the_kernels_share_of_a_core_and_the_nearest_is_chosen() -> None:
    # nice 0 beside nice 0: half a core; beside nice 1 (weight 820): 1024 / 1844 of it
    assert [cpu_share.slowdown(nice) for nice in (0, 1, 2, 5)] == [2.0, 1.8, 1.64, 1.33]
    assert [cpu_share.competing_nice(slower) for slower in (2.0, 1.95, 1.78, 1.7, 1.1)] == [0, 0, 1, 2, 10]


#: A stand-in for the probe: "slower" by 2 and 3 in a cgroup other than the test's own (a busy load's), by 1 in the
#: test's own (which may itself be a load's: ``suite-time --slower`` runs this suite in one).
PROBE_BY_CGROUP = (
    "import os, pathlib; inside = pathlib.Path('/proc/self/cgroup').read_text() != os.environ['TEST_OWN_CGROUPS']; "
    "print(2.0 if inside else 1.0, 3.0 if inside else 1.0)"
)


def probe_by_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``cpu_share.PROBE`` the stand-in, told this process's cgroups."""
    monkeypatch.setenv("TEST_OWN_CGROUPS", Path("/proc/self/cgroup").read_text())
    monkeypatch.setattr(cpu_share, "PROBE", PROBE_BY_CGROUP)


def competing_load_or_skip(nice: int) -> cpu_share.CompetingLoad:
    try:
        return cpu_share.CompetingLoad(nice)
    except OSError as error:
        pytest.skip(f"no cgroup may be made here: {error}")


def test_the_competing_load_is_one_busy_process_pinned_to_each_cpu_at_its_nice_value_until_closed() -> None:
    load = competing_load_or_skip(nice=1)
    try:
        cpus = sorted(os.sched_getaffinity(0))
        assert [os.sched_getaffinity(process.pid) for process in load.busy] == [{cpu} for cpu in cpus]
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, process.pid) for process in load.busy] == [own + 1] * len(cpus)
        for process in load.busy:
            assert f"{load.cgroup.path.name}\n" in Path(f"/proc/{process.pid}/cgroup").read_text()
            assert process.poll() is None  # busy
    finally:
        load.close()
    assert all(process.returncode is not None for process in load.busy) and not load.cgroup.path.exists()


def test_the_busy_processes_die_with_the_process_that_started_them() -> None:
    competing_load_or_skip(nice=19).close()
    starter = subprocess.Popen(
        [sys.executable, "-c", "from benchmarks.cpu_share import CompetingLoad; import time\n"
         "load = CompetingLoad(19); print(load.cgroup.path, *(p.pid for p in load.busy), flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(cpu_share.__file__).parents[1],
    )  # fmt: skip
    assert starter.stdout is not None
    cgroup, *busy = starter.stdout.readline().split()
    starter.kill()  # no close(): only the kernel can stop them now
    starter.wait()
    try:
        for pid in map(int, busy):
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
                assert time.monotonic() < deadline, f"busy process {pid} outlived its starter"
                time.sleep(0.05)
    finally:
        for pid in map(int, busy):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        Path(cgroup).rmdir()


def test_the_measured_slowdown_is_the_loaded_runs_over_the_runs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    competing_load_or_skip(nice=19).close()
    probe_by_cgroup(monkeypatch)
    assert cpu_share.measured_slowdown(nice=19, repeats=2) == {"torch": 2.0, "python": 3.0}
