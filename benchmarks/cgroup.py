"""A cgroup of one controller, made inside this process's own so that whatever contains this process still holds:
what the benchmarks and the fault tests put the processes they start in, to cap their memory (``MemoryCgroup``) or
their CPU time (``CpuCgroup``), or to let them compete by nice value alone (``benchmarks.cpu_share``). Linux and root;
OSError elsewhere.

Cgroup v1 mounts each controller in a folder of its own (``/sys/fs/cgroup/memory``); v2 has one tree, in which a
cgroup may use a controller only when its parent hands it down (``cgroup.subtree_control``), and a parent holding
processes may not hand a controller down: on v2 this works where this process's cgroup is the root (a container's,
for one). The machines this project measured on have v1.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from simulation.local_run import stop_found

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Hierarchy:
    """Where one controller's cgroups are: cgroup ``version`` 1 or 2, under ``mount``."""

    controller: str
    version: int
    mount: Path

    def own_cgroup(self, proc_cgroup: str) -> Path:
        """This process's cgroup folder under ``mount``, from the text of /proc/self/cgroup (v1: the line that names
        the controller; v2: the line of hierarchy 0)."""
        for line in proc_cgroup.splitlines():
            number, controllers, path = line.split(":", 2)
            v1 = self.version == 1 and self.controller in controllers.split(",")
            if v1 or (self.version == 2 and number == "0" and controllers == ""):
                return self.mount / path.lstrip("/")
        raise OSError(f"this process is in no {self.controller} cgroup")


def hierarchy(controller: str, root: Path = CGROUP_ROOT) -> Hierarchy:
    """Where ``controller`` is mounted under ``root``: cgroup v1's folder of its own when there is one, else v2's
    tree when it offers the controller (OSError when neither)."""
    if (root / controller / "cgroup.procs").is_file():
        return Hierarchy(controller, 1, root / controller)
    offered = root / "cgroup.controllers"
    if offered.is_file() and controller in offered.read_text().split():
        return Hierarchy(controller, 2, root)
    raise OSError(f"no cgroup {controller} controller is mounted at {root}")


class Cgroup:
    """A fresh cgroup of ``controller`` inside this process's own (``proc_cgroup``: the text of /proc/self/cgroup,
    read when not given; ``root``: where cgroups are mounted). ``enter`` moves the calling process into it: pass it as
    ``preexec_fn`` to ``subprocess``, so that a command and everything it starts are in it from the start. ``close``
    stops what is left in it by PID and removes it."""

    def __init__(self, controller: str, root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> None:
        self.hierarchy = hierarchy(controller, root)
        self.parent = self.hierarchy.own_cgroup(proc_cgroup or Path("/proc/self/cgroup").read_text())
        if self.hierarchy.version == 2:
            (self.parent / "cgroup.subtree_control").write_text(f"+{controller}")
        self.path = self.parent / f"fedft-{controller}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()

    @property
    def version(self) -> int:
        return self.hierarchy.version

    def write(self, name: str, value: str) -> None:
        """Write ``value`` to this cgroup's file ``name``."""
        (self.path / name).write_text(value)

    def read(self, name: str) -> str:
        """This cgroup's file ``name``."""
        return (self.path / name).read_text()

    def has(self, name: str) -> bool:
        """Whether the kernel offers this cgroup the file ``name`` (swap accounting, for one, is optional)."""
        return (self.path / name).is_file()

    def enter(self) -> None:
        """Move the calling process into this cgroup."""
        self.write("cgroup.procs", str(os.getpid()))

    def pids(self) -> list[int]:
        """The processes in this cgroup now."""
        return [int(pid) for pid in self.read("cgroup.procs").split()]

    def close(self) -> None:
        """Stop what still runs in it (by PID), then remove it."""
        stop_found(self.pids, grace=2.0)
        self.path.rmdir()


class MemoryCgroup(Cgroup):
    """A memory cgroup whose processes may hold at most ``limit_bytes`` between them, page cache included, with no
    swap where the kernel accounts for it (None: no limit, only accounting). Above the limit the kernel reclaims the
    cgroup's clean file pages (read again when needed) and, when that is not enough, kills one of its processes (an
    OOM kill, which ``oom_kills`` counts)."""

    #: The files of each cgroup version: the limit, the swap limit, the peak and the OOM kill count.
    FILES = {
        1: ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max_usage_in_bytes", "memory.oom_control"),
        2: ("memory.max", "memory.swap.max", "memory.peak", "memory.events"),
    }

    def __init__(self, limit_bytes: int | None, root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> None:
        super().__init__("memory", root, proc_cgroup)
        self.limit_file, self.swap_file, self.peak_file, self.events_file = self.FILES[self.version]
        if limit_bytes is not None:
            self.set_limit(limit_bytes)

    def set_limit(self, limit_bytes: int | None) -> None:
        """Change the limit, also while its processes run (None: no limit). Lowering it below what is charged makes
        the kernel reclaim first, and fails (OSError, EBUSY) when it cannot."""
        if self.version == 2:  # memory and swap apart: no swap under a limit, as much as the machine has without one
            self.write(self.limit_file, "max" if limit_bytes is None else str(limit_bytes))
            if self.has(self.swap_file):
                self.write(self.swap_file, "max" if limit_bytes is None else "0")
            return
        # v1: the swap file limits memory + swap, which may never be below memory alone: raised first when the limit
        # goes up, lowered last when it goes down
        value = "-1" if limit_bytes is None else str(limit_bytes)
        raising = limit_bytes is None or limit_bytes > int(self.read(self.limit_file))
        order = (self.swap_file, self.limit_file) if raising else (self.limit_file, self.swap_file)
        for name in order:
            if self.has(name):
                self.write(name, value)

    def usage_bytes(self) -> int:
        """What is charged to the cgroup now."""
        return int(self.read("memory.usage_in_bytes" if self.version == 1 else "memory.current"))

    def peak_bytes(self) -> int:
        """The most memory charged to this cgroup at once (page cache included)."""
        return int(self.read(self.peak_file))

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for want of memory."""
        return oom_kills(self.read(self.events_file))


def oom_kills(events_text: str) -> int:
    """The ``oom_kill`` count in a cgroup's ``memory.oom_control`` (v1) or ``memory.events`` (v2); 0 when the kernel
    does not report it."""
    for line in events_text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return 0


class CpuCgroup(Cgroup):
    """A CPU cgroup whose processes share at most ``share`` CPUs (``share=0.1``: 10 ms of CPU per 100 ms, a CFS
    quota) or, with ``share=None``, as much as the machine has: its processes then compete with each other by their
    nice values alone (the kernel's autogroups, which would weigh each session as one, apply only outside a cgroup)."""

    PERIOD_US = 100_000

    def __init__(self, share: float | None, root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> None:
        super().__init__("cpu", root, proc_cgroup)
        if share is None:
            return
        quota = max(1000, int(share * self.PERIOD_US))
        if self.version == 2:
            self.write("cpu.max", f"{quota} {self.PERIOD_US}")
        else:
            self.write("cpu.cfs_period_us", str(self.PERIOD_US))
            self.write("cpu.cfs_quota_us", str(quota))

    def throttled_seconds(self) -> float:
        """How long the quota has held the cgroup's processes back so far, summed over the periods it throttled them
        (``cpu.stat``: v1 in nanoseconds, v2 in microseconds)."""
        stat = dict(line.split() for line in self.read("cpu.stat").splitlines())
        if self.version == 1:
            return int(stat.get("throttled_time", 0)) / 1e9
        return int(stat.get("throttled_usec", 0)) / 1e6
