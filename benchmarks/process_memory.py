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


def by_kind(kinds: list[str], sizes: list[int]) -> dict[str, int]:
    """Sizes summed per kind, largest first."""
    totals: dict[str, int] = {}
    for kind, size in zip(kinds, sizes, strict=True):
        totals[kind] = totals.get(kind, 0) + size
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


#: Process kinds of a simulation, by a word of the command line (first match wins). ``flwr-simulation`` runs the
#: ServerApp and the simulation engine (Ray's driver, every SuperNode's context) in one process.
SIMULATION_KINDS = (
    ("ClientAppActor", "client actor"),
    ("flwr-simulation", "simulation engine"),
    ("flower-superlink", "SuperLink"),
    ("flower-superexec", "SuperExec"),
    ("raylet", "Ray daemons"),
    ("gcs_server", "Ray daemons"),
    ("ray/", "Ray daemons"),
    ("ray::", "Ray workers (idle)"),
    ("-m simulation", "launcher"),
    ("flwr run", "launcher"),
)


def simulation_kind(pid: int) -> str:
    """Which part of a simulation process ``pid`` is, from its command line (``other`` when none matches)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    return next((kind for word, kind in SIMULATION_KINDS if word in command), "other")


class PeakMemory(threading.Thread):
    """Every ``interval`` s: the processes ``find_pids`` returns, their summed and largest memory, their
    number and how many of them ``counted`` picks; keeps the peak of each until ``stop``."""

    def __init__(
        self,
        find_pids: Callable[[], list[int]],
        memory_kib: Callable[[int], int],
        counted: Callable[[int], bool] = lambda pid: False,
        interval: float = 0.5,
        kind: Callable[[int], str] = lambda pid: "process",
    ) -> None:
        super().__init__(daemon=True)
        self.find_pids, self.memory_kib, self.counted, self.interval = find_pids, memory_kib, counted, interval
        self.kind = kind
        self.peak_total_kib = self.peak_largest_kib = self.peak_processes = self.peak_counted = 0
        #: At the sample of the peak total: KiB summed per ``kind`` of process (what the peak is made of).
        self.peak_by_kind_kib: dict[str, int] = {}
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            pids = self.find_pids()
            kinds = [self.kind(pid) for pid in pids]  # before the sizes: a process that ends between is "gone"
            sizes = [self.memory_kib(pid) for pid in pids]
            if sum(sizes) > self.peak_total_kib:
                self.peak_total_kib = sum(sizes)
                self.peak_by_kind_kib = by_kind(kinds, sizes)
            self.peak_largest_kib = max(self.peak_largest_kib, max(sizes, default=0))
            self.peak_processes = max(self.peak_processes, len(pids))
            self.peak_counted = max(self.peak_counted, sum(self.counted(pid) for pid in pids))

    def stop(self) -> None:
        self._stopped.set()
        self.join()
