"""benchmarks/cgroup.py: which hierarchy holds a controller and this process's cgroup in it, the files each cgroup
version's memory limit and CPU quota are written to (on folders laid out as each version's, so that both versions are
tested whichever this machine has), and real cgroups where this machine lets us make them (root; CI skips those)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, TypeVar

import pytest

from benchmarks.cgroup import Cgroup, CpuCgroup, MemoryCgroup, hierarchy, oom_kills

C = TypeVar("C", bound=Cgroup)

#: /proc/self/cgroup of a process in cgroup v1's memory and cpu hierarchies and in v2's tree.
PROC_CGROUP = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/x\n0::/user.slice/session\n"


def v1_root(tmp_path: Path) -> Path:
    """Folders laid out as cgroup v1's: a mount per controller, this process's cgroup in each."""
    for controller, own in (("memory", "process_api/abc"), ("cpu", "x")):
        (tmp_path / controller / own).mkdir(parents=True)
        (tmp_path / controller / "cgroup.procs").write_text("")
    return tmp_path


def v2_root(tmp_path: Path) -> Path:
    """Folders laid out as cgroup v2's: one tree offering cpu and memory, this process's cgroup in it."""
    (tmp_path / "user.slice" / "session").mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    return tmp_path


def the_one_made(parent: Path) -> Path:
    (made,) = parent.glob("fedft-*")
    return made


def test_the_hierarchy_is_v1s_own_mount_when_there_is_one_else_v2s_tree(tmp_path: Path) -> None:
    v1 = v1_root(tmp_path / "v1")
    assert (hierarchy("memory", v1).version, hierarchy("memory", v1).mount) == (1, v1 / "memory")
    v2 = v2_root(tmp_path / "v2")
    assert (hierarchy("cpu", v2).version, hierarchy("cpu", v2).mount) == (2, v2)
    with pytest.raises(OSError, match="no cgroup hugetlb controller is mounted"):
        hierarchy("hugetlb", v2)
    with pytest.raises(OSError, match="no cgroup memory controller"):
        hierarchy("memory", tmp_path / "neither")


def test_own_cgroup_is_read_from_proc_self_cgroup(tmp_path: Path) -> None:
    v1 = v1_root(tmp_path / "v1")
    assert hierarchy("memory", v1).own_cgroup(PROC_CGROUP) == v1 / "memory/process_api/abc"
    assert hierarchy("cpu", v1).own_cgroup(PROC_CGROUP) == v1 / "cpu/x"  # a mount shared with cpuacct
    v2 = v2_root(tmp_path / "v2")
    assert hierarchy("memory", v2).own_cgroup(PROC_CGROUP) == v2 / "user.slice/session"
    with pytest.raises(OSError, match="no memory cgroup"):
        hierarchy("memory", v1).own_cgroup("0::/\n")


def test_a_cgroup_is_made_inside_this_process_s_own_and_v2_hands_the_controller_down(tmp_path: Path) -> None:
    v1 = v1_root(tmp_path / "v1")
    made = Cgroup("memory", v1, PROC_CGROUP)
    assert made.path.parent == v1 / "memory/process_api/abc" and made.path.is_dir()
    assert not (made.path.parent / "cgroup.subtree_control").exists()
    v2 = v2_root(tmp_path / "v2")
    made = Cgroup("cpu", v2, PROC_CGROUP)
    assert made.path.parent == v2 / "user.slice/session" and made.path.is_dir()
    assert (made.path.parent / "cgroup.subtree_control").read_text() == "+cpu"


def test_the_cpu_quota_is_written_where_each_version_keeps_it(tmp_path: Path) -> None:
    v1 = v1_root(tmp_path / "v1")
    CpuCgroup(0.25, v1, PROC_CGROUP)
    made = the_one_made(v1 / "cpu/x")
    assert (made / "cpu.cfs_period_us").read_text() == "100000"
    assert (made / "cpu.cfs_quota_us").read_text() == "25000"
    v2 = v2_root(tmp_path / "v2")
    CpuCgroup(0.001, v2, PROC_CGROUP)  # below the kernel's least quota of 1 ms: raised to it
    assert (the_one_made(v2 / "user.slice/session") / "cpu.max").read_text() == "1000 100000"
    unlimited = CpuCgroup(None, v2_root(tmp_path / "none"), PROC_CGROUP)
    assert list(unlimited.path.iterdir()) == []


def test_throttled_seconds_reads_each_version_s_unit(tmp_path: Path) -> None:
    v1 = CpuCgroup(None, v1_root(tmp_path / "v1"), PROC_CGROUP)
    v1.write("cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000000\n")
    assert v1.throttled_seconds() == 2.5
    v2 = CpuCgroup(None, v2_root(tmp_path / "v2"), PROC_CGROUP)
    v2.write("cpu.stat", "usage_usec 900\nnr_throttled 4\nthrottled_usec 1500000\n")
    assert v2.throttled_seconds() == 1.5


class RecordedMemoryCgroup(MemoryCgroup):
    """A ``MemoryCgroup`` that records the files it writes, in order, on folders without the kernel's files: a file
    not yet written reads as a new cgroup's (no limit), and every optional file is offered."""

    written: ClassVar[list[tuple[str, str]]] = []

    def write(self, name: str, value: str) -> None:
        self.written.append((name, value))
        super().write(name, value)

    def read(self, name: str) -> str:
        if self.has(name) and not (self.path / name).exists():
            return "9223372036854771712" if self.version == 1 else "max"
        return super().read(name)

    def has(self, name: str) -> bool:
        return True


def test_the_memory_limit_leaves_no_swap_and_v1_keeps_memory_plus_swap_above_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[tuple[str, str]] = []
    monkeypatch.setattr(RecordedMemoryCgroup, "written", written)
    RecordedMemoryCgroup(2**30, v2_root(tmp_path / "v2"), PROC_CGROUP)
    assert written == [("memory.max", str(2**30)), ("memory.swap.max", "0")]

    written.clear()
    v1 = RecordedMemoryCgroup(2**30, v1_root(tmp_path / "v1"), PROC_CGROUP)
    v1.set_limit(2**29)
    v1.set_limit(2**31)
    v1.set_limit(None)
    limit, both = "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"
    assert written == [
        (limit, str(2**30)), (both, str(2**30)),  # down from unlimited: memory first
        (limit, str(2**29)), (both, str(2**29)),  # down
        (both, str(2**31)), (limit, str(2**31)),  # up: memory + swap first
        (both, "-1"), (limit, "-1"),  # unlimited
    ]  # fmt: skip


def test_oom_kills_reads_both_cgroup_versions() -> None:
    assert oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3  # v1 memory.oom_control
    assert oom_kills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n") == 2  # v2 memory.events
    assert oom_kills("oom_kill_disable 0\nunder_oom 0\n") == 0  # an old kernel that does not count


def made_or_skip(kind: Callable[..., C], limit: float) -> C:
    """A real cgroup of ``kind`` with ``limit``, or the test skipped where this machine lets us make none (not root,
    no such controller)."""
    try:
        return kind(limit)
    except OSError as err:
        pytest.skip(f"cannot make a cgroup here: {err}")


ALLOCATE = "import sys; b = bytearray(int(sys.argv[1]) * 2**20); b[:: 4096] = b'x' * len(b[:: 4096])"


def test_a_process_over_the_memory_limit_is_killed_and_one_under_it_is_not() -> None:
    for limit_mib, allocate_mib, killed in ((100, 300, True), (400, 100, False)):
        cgroup = made_or_skip(MemoryCgroup, limit_mib * 2**20)
        try:
            code = subprocess.call([sys.executable, "-c", ALLOCATE, str(allocate_mib)], preexec_fn=cgroup.enter)
            assert (code == -9) is killed
            assert (cgroup.oom_kills() == 1) is killed
            assert cgroup.peak_bytes() <= limit_mib * 2**20
        finally:
            cgroup.close()
        assert not cgroup.path.exists()


def test_a_memory_limit_is_raised_lifted_and_lowered_in_the_order_the_kernel_accepts() -> None:
    cgroup = made_or_skip(MemoryCgroup, 100 * 2**20)
    try:
        for limit_mib, allocate_mib, killed in ((400, 300, False), (None, 300, False), (100, 300, True)):
            cgroup.set_limit(None if limit_mib is None else limit_mib * 2**20)
            code = subprocess.call([sys.executable, "-c", ALLOCATE, str(allocate_mib)], preexec_fn=cgroup.enter)
            assert (code == -9) is killed, (limit_mib, code)
    finally:
        cgroup.close()


def test_a_busy_process_under_a_cpu_quota_gets_its_share_and_close_stops_what_is_left() -> None:
    cgroup = made_or_skip(CpuCgroup, 0.1)
    try:
        busy = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile time.process_time() < 60: pass"], preexec_fn=cgroup.enter
        )
        tick = time.monotonic()
        assert cgroup.pids() == [busy.pid]
        # Held back 0.9 s a second while it gets its share (about 0.6 s in all), however loaded the machine is
        while cgroup.throttled_seconds() < 0.5:
            assert time.monotonic() - tick < 20, "the quota never held the busy process back"
            time.sleep(0.05)
        utime, stime = Path(f"/proc/{busy.pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
        used = (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")
        assert used <= 0.1 * (time.monotonic() - tick) + 0.1  # a tenth of a CPU, and a tick's rounding
    finally:
        cgroup.close()
    assert busy.wait(timeout=5) is not None and not cgroup.path.exists()
