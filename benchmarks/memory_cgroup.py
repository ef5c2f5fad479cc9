"""A memory cgroup with a hard limit, for running a command that must stay under it (Linux, root).

The kernel charges a cgroup for its processes' anonymous memory and for the page cache they read or write; above the
hard limit it first reclaims the cgroup's clean file pages (which are read again when needed) and, when that is not
enough, kills one of its processes (an OOM kill, counted here). Swap is limited to nothing where the kernel accounts
for it, so anonymous memory cannot be paged out instead. The new cgroup is made inside this process's own, so that
the limits of whatever contains this process still hold. Measured with the cgroup-v1 memory controller
(``/sys/fs/cgroup/memory``). Under cgroup v2 this works only where this process's cgroup may hand the memory
controller to a child: the real root, or a delegated cgroup that holds no process itself (a systemd session scope
does, and then making the cgroup fails with an OSError).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from simulation.local_run import stop_found

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Controller:
    """Where a cgroup version keeps what this module reads and writes, relative to a cgroup's folder."""

    mount: Path
    limit: str
    swap_limit: str
    peak: str
    events: str

    def own_cgroup(self, proc_cgroup: str) -> Path:
        """This process's cgroup folder under ``mount``, from the text of /proc/self/cgroup."""
        for line in proc_cgroup.splitlines():
            _, controllers, path = line.split(":", 2)
            if (self is V1 and "memory" in controllers.split(",")) or (self is V2 and controllers == ""):
                return self.mount / path.lstrip("/")
        raise OSError("this process is in no memory cgroup")


V1 = Controller(CGROUP_ROOT / "memory", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes",
                "memory.max_usage_in_bytes", "memory.oom_control")  # fmt: skip
V2 = Controller(CGROUP_ROOT, "memory.max", "memory.swap.max", "memory.peak", "memory.events")


def controller() -> Controller:
    """The memory controller this machine has: cgroup v1's when mounted, else v2's (OSError when neither)."""
    if (V1.mount / V1.limit).is_file():
        return V1
    if "memory" in (CGROUP_ROOT / "cgroup.controllers").read_text().split():
        return V2
    raise OSError("no cgroup memory controller is mounted")


def oom_kills(events_text: str) -> int:
    """The ``oom_kill`` count in a cgroup's ``memory.oom_control`` (v1) or ``memory.events`` (v2); 0 when the kernel
    does not report it."""
    for line in events_text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return 0


class MemoryCgroup:
    """A fresh cgroup limited to ``limit_bytes`` (None: no limit, only accounting), removed on ``close``.

    ``enter`` moves the calling process into it: pass it as ``preexec_fn`` to ``subprocess`` so that the command and
    everything it starts are charged to it from their first page.
    """

    def __init__(self, limit_bytes: int | None) -> None:
        self.controller = controller()
        parent = self.controller.own_cgroup(Path("/proc/self/cgroup").read_text())
        if self.controller is V2:
            (parent / "cgroup.subtree_control").write_text("+memory")
        self.path = parent / f"fedft-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        if limit_bytes is not None:
            (self.path / self.controller.limit).write_text(str(limit_bytes))
            swap = self.path / self.controller.swap_limit
            if swap.exists():  # v1: memory + swap, so the same value; v2: swap alone
                swap.write_text(str(limit_bytes) if self.controller is V1 else "0")

    def enter(self) -> None:
        """Move the calling process into this cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        """The processes in this cgroup now."""
        return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]

    def peak_bytes(self) -> int:
        """The most memory charged to this cgroup at once (page cache included)."""
        return int((self.path / self.controller.peak).read_text())

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for want of memory."""
        return oom_kills((self.path / self.controller.events).read_text())

    def close(self) -> None:
        """Stop what still runs in it (by PID), then remove it."""
        stop_found(self.pids, grace=2.0)
        self.path.rmdir()


def drop_page_cache() -> None:
    """Write dirty pages and drop the clean page cache, so that the files the next run reads are charged to its own
    cgroup and not to whoever read them before."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1")
