"""A machine made slower for what runs in a cgroup: busy processes that compete with its every thread for its core
(``CompetingLoad``; ``python -m benchmarks suite-time --slower``), with a probe of the slowdown they give
(``measured_slowdown``). Linux and root: the load lives in a CPU cgroup (``benchmarks.cgroup.CpuCgroup``)."""

from __future__ import annotations

import ctypes
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import TypedDict

from benchmarks.cgroup import CpuCgroup

#: The kernel's weight of a task at nice 0 to 19 (``sched_prio_to_weight`` in kernel/sched/core.c): on a core shared
#: with one busy task at nice n, a task at nice 0 gets 1024 / (1024 + weight[n]) of it.
NICE_WEIGHTS = (1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)


def slowdown(nice: int) -> float:
    """How many times slower a core runs a task at nice 0 beside one busy task at ``nice``."""
    return round(1 + NICE_WEIGHTS[nice] / NICE_WEIGHTS[0], 2)


def competing_nice(slower: float) -> int:
    """The nice value of the busy tasks whose ``slowdown`` is nearest ``slower``."""
    return min(range(len(NICE_WEIGHTS)), key=lambda nice: abs(slowdown(nice) - slower))


#: ``prctl``'s option that has the kernel send a process a signal when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: libc's ``prctl`` (Linux; None elsewhere), looked up here: a child between fork and exec may not load a library
#: (another thread of the parent may have held the loader's lock at the fork).
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


class CompetingLoad:
    """One busy process per CPU this process may use, each pinned to its CPU at ``nice`` (above this process's own),
    in a fresh CPU cgroup for the timed commands to enter too (``enter``): a thread of theirs at nice 0 gets
    ``1 / slowdown(nice)`` of a core while it is the only such thread there, as on a CPU that many times slower;
    waiting (for a child process, a socket, a sleep) is not slowed, as on a slower CPU. Two such threads sharing a core
    are slowed less (at nice 1: 1.4x each instead of 1.8x), so a workload of more threads than cores is slowed less
    than ``slowdown(nice)``. The busy processes die with this one; ``close`` stops them and anything else left in the
    cgroup by PID, and removes the cgroup."""

    def __init__(self, nice: int) -> None:
        if _PRCTL is None:
            raise OSError("a competing load needs Linux (prctl)")
        self._prctl = _PRCTL
        self.nice = nice
        self.cgroup = CpuCgroup(None)
        self.closed = False
        self.busy: list[subprocess.Popen[bytes]] = []
        try:
            for cpu in sorted(os.sched_getaffinity(0)):
                self.busy.append(
                    subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=self._pinned(cpu))
                )
        except BaseException:
            self.close()
            raise

    def _pinned(self, cpu: int) -> Callable[[], None]:
        parent = os.getpid()

        def pin() -> None:
            # killed when this process dies; gone at once if it died before that was asked
            if self._prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent:
                os._exit(1)
            os.sched_setaffinity(0, {cpu})
            os.nice(self.nice)
            self.cgroup.enter()

        return pin

    def enter(self) -> None:
        """Move the calling process into the busy processes' cgroup."""
        self.cgroup.enter()

    def close(self) -> None:
        """Stop the busy processes, then anything else left in the cgroup (by PID), and remove the cgroup; once."""
        if self.closed:
            return
        for process in self.busy:
            process.kill()
            process.wait()
        self.cgroup.close()
        self.closed = True


#: What ``measured_slowdown`` runs in a fresh interpreter: 150 training steps of a small convolutional net on one
#: torch thread, then a pure-Python loop; it prints the seconds of each.
PROBE = """
import time, torch
torch.manual_seed(0)
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(10816, 10))
sgd = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
tick = time.perf_counter()
for _ in range(150):
    sgd.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    sgd.step()
tock, total = time.perf_counter(), 0
for i in range(3_000_000):
    total += i * i
print(tock - tick, time.perf_counter() - tock)
"""


class Slowdown(TypedDict):
    """How many times slower the probe ran beside a ``CompetingLoad`` than alone."""

    torch: float
    python: float


def _probe_seconds(load: CompetingLoad | None) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=load.enter if load else None,
    )
    torch_seconds, python_seconds = map(float, done.stdout.split())
    return torch_seconds, python_seconds


def measured_slowdown(nice: int, repeats: int = 3) -> Slowdown:
    """The probe's slowdown beside ``CompetingLoad(nice)``: the median of ``repeats`` runs beside it over the median
    of as many alone, alternating (each loaded run with a load of its own)."""
    alone, beside = [], []
    for _ in range(repeats):
        alone.append(_probe_seconds(None))
        load = CompetingLoad(nice)
        try:
            beside.append(_probe_seconds(load))
        finally:
            load.close()
    ratios = [statistics.median(b[i] for b in beside) / statistics.median(a[i] for a in alone) for i in (0, 1)]
    return Slowdown(torch=round(ratios[0], 2), python=round(ratios[1], 2))
