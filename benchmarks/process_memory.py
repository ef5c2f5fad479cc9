"""Peak memory of a group of processes (a whole run: SuperLink, Ray, ServerApp, ClientApp actors), sampled
from /proc by a background thread while the run goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path


def _status_kib(pid: int, field: str, file: str = "status") -> int:
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int) -> int:
    """Resident set size in KiB (shared pages counted in every process that maps them); 0 once gone."""
    return _status_kib(pid, "VmRSS:")


def pss_kib(pid: int) -> int:
    """Proportional set size in KiB (shared pages divided among the processes sharing them); RSS where
    smaps_rollup cannot be read."""
    return _status_kib(pid, "Pss:", "smaps_rollup") or rss_kib(pid)


class PeakMemory(threading.Thread):
    """Every ``interval`` s: the processes ``find_pids`` returns, their summed and largest memory, their
    number and how many of them ``counted`` picks; keeps the peak of each until ``stop``."""

    def __init__(
        self,
        find_pids: Callable[[], list[int]],
        memory_kib: Callable[[int], int],
        counted: Callable[[int], bool] = lambda pid: False,
        interval: float = 0.5,
    ) -> None:
        super().__init__(daemon=True)
        self.find_pids, self.memory_kib, self.counted, self.interval = find_pids, memory_kib, counted, interval
        self.peak_total_kib = self.peak_largest_kib = self.peak_processes = self.peak_counted = 0
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            pids = self.find_pids()
            sizes = [self.memory_kib(pid) for pid in pids]
            self.peak_total_kib = max(self.peak_total_kib, sum(sizes))
            self.peak_largest_kib = max(self.peak_largest_kib, max(sizes, default=0))
            self.peak_processes = max(self.peak_processes, len(pids))
            self.peak_counted = max(self.peak_counted, sum(self.counted(pid) for pid in pids))

    def stop(self) -> None:
        self._stopped.set()
        self.join()
