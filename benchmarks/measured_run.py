"""A whole simulation measured: ``python -m simulation`` of a checkout (SuperLink, Ray, ServerApp, ClientApp actors) as
a subprocess, its wall time, the peak memory of all its processes, its results files and where its time went.

The checkout may be another one (``project_dir``: e.g. the code before a change, in a second git worktree), so that
two versions can be measured side by side by the same harness. Every process of the run inherits a marker in its
environment, by which a background thread finds them; memory is summed over them every 0.5 s, both as resident set
size (RSS: shared pages counted in every process) and as proportional set size (PSS: shared pages divided among their
users), the peak broken down by process kind.

Where the time went (``profile``): the run's spans (``profiling.spans``, written where ``FEDFT_PROFILE_DIR`` says)
laid on one time line and every instant given to exactly one phase, so the phases add up to the wall time. The
ServerApp's spans nest (a round's steps inside the run); at each instant the innermost one names the phase. While
the server waits for replies (``exchange``) the clients' spans say what the wait was: ``client-compute`` when any
client computes, else ``client-data`` when any loads data, else ``client-decode`` (building the model from the
message), else ``client-other`` (the rest of a client's handling: its reply, Flower's wrapper), else ``transfer``
(no client busy: messages queued, moving between processes, or waiting for a poll). An exchange inside
``node-wait`` or ``label-counts`` (the start-up queries) counts as that query phase. Instants inside the ServerApp
that no step claims are ``other`` (Flower's round loop, logging); the launcher's time before the ServerApp starts
is ``startup`` (SuperLink, Flower, Ray, the app's imports) and after it ends ``shutdown``. The server pretrains in a
background thread while it waits for its clients: the spans overlap, the instants they share count as ``node-wait``
(the later, innermost span) and what pretraining takes beyond the wait as ``pretraining``. Round r runs from the
start of its ``sampling`` to the start of round r + 1's (the last round ends where ``finish`` starts); what comes
before round 1 is the run's ``start``, what comes after the last round its ``end``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiling.spans import (
    CLIENT_COMPUTE,
    CLIENT_DATA,
    CLIENT_DECODE,
    CLIENT_MESSAGE,
    EXCHANGE,
    FINISH,
    LABEL_COUNTS,
    LAUNCH,
    NODE_WAIT,
    SAMPLING,
    SERVER,
)
from run_config.text import format_overrides
from simulation.local_run import PROJECT_DIR, processes_marked, stop_found, stop_processes

# Peak memory of a group of processes, sampled from /proc by a background thread while the run goes on.


def _status_kib(pid: int, key: str, file: str = "status") -> int:
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(key):
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


# A simulation as a measured subprocess.

MARKER = "FEDFT_BENCHMARK_RUN"
#: How long a launcher told to stop (SIGTERM) gets to stop its run and remove its files before everything is killed.
LAUNCHER_GRACE_SECONDS = 30.0


def cache_overrides(checkout: Path, folder: Path) -> dict[str, object]:
    """Overrides that put ``checkout``'s caches (pretrained weights, features and, where the checkout has one, the
    shared data cache) in ``folder``, so that a run starts from what that folder holds."""
    overrides: dict[str, object] = {
        "pretrain-cache-dir": str(folder / "pretrained"),
        "feature-cache-dir": str(folder / "features"),
    }
    if "data-cache-dir" in (checkout / "pyproject.toml").read_text():  # older checkouts have no shared data cache
        overrides["data-cache-dir"] = str(folder / "arrays")
    return overrides


@dataclass
class SimulationRun:
    """What one measured simulation did."""

    exit_code: int
    wall_seconds: float
    peak_rss_gib: float
    peak_pss_gib: float
    #: What the peak PSS is made of: MiB per process kind (``simulation_kind``).
    peak_pss_by_kind_mib: dict[str, float] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def round_seconds(self) -> list[float]:
        return [r["wall_seconds"] for r in self.rounds]


def run_simulation_measured(
    overrides: Mapping[str, object],
    *,
    num_supernodes: int,
    results_dir: Path,
    log_file: Path,
    cpus_per_client: int = 1,
    project_dir: Path = PROJECT_DIR,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    timeout: float | None = None,
) -> SimulationRun:
    """Run ``project_dir``'s ``python -m simulation`` with ``overrides`` (``results-dir`` and ``run-name`` are set
    here) and measure it. ``preexec_fn`` runs in the child before the command (e.g. to enter a cgroup); after
    ``timeout`` seconds the launcher is told to stop (SIGTERM), whatever of the run is left is then stopped by PID,
    and the exit code is 124."""
    run_name = "run"
    config = {**overrides, "results-dir": str(results_dir), "run-name": run_name}
    marker = uuid.uuid4().hex
    command = [
        sys.executable,
        "-m",
        "simulation",
        "--num-supernodes",
        str(num_supernodes),
        "--cpus-per-client",
        str(cpus_per_client),
        "--run-config",
        format_overrides(config),
    ]
    rss = PeakMemory(lambda: processes_marked(marker, variable=MARKER), rss_kib)
    pss = PeakMemory(lambda: processes_marked(marker, variable=MARKER), pss_kib, kind=simulation_kind)
    rss.start()
    pss.start()
    tick = time.perf_counter()
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=project_dir,
            env={**os.environ, **(env or {}), MARKER: marker, "PYTHONPATH": str(project_dir)},
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_fn,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM: the launcher stops its run; SIGKILL if it has not after the grace
            stop_processes([process.pid], grace=LAUNCHER_GRACE_SECONDS, timeout=LAUNCHER_GRACE_SECONDS + 5)
            stop_found(lambda: processes_marked(marker, variable=MARKER), grace=2.0)
            process.wait()
            code = 124
    wall = time.perf_counter() - tick
    rss.stop()
    pss.stop()
    folder = results_dir / run_name
    rounds_file, summary_file = folder / "rounds.jsonl", folder / "summary.json"
    return SimulationRun(
        exit_code=code,
        wall_seconds=wall,
        peak_rss_gib=rss.peak_total_kib / 2**20,
        peak_pss_gib=pss.peak_total_kib / 2**20,
        peak_pss_by_kind_mib={kind: kib / 1024 for kind, kib in pss.peak_by_kind_kib.items()},
        rounds=[json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else [],
        summary=json.loads(summary_file.read_text()) if summary_file.exists() else {},
    )


# Where a profiled run's wall time went.

STARTUP, SHUTDOWN, OTHER, TRANSFER, CLIENT_OTHER = "startup", "shutdown", "other", "transfer", "client-other"
#: Client spans in the order they win an instant of an exchange (any client computing makes it compute time).
CLIENT_PRIORITY = (CLIENT_COMPUTE, CLIENT_DATA, CLIENT_DECODE, CLIENT_MESSAGE)
CLIENT_SPANS = frozenset(CLIENT_PRIORITY)
#: Server phases whose exchanges are start-up queries, not a round's work.
QUERY_PHASES = (NODE_WAIT, LABEL_COUNTS)


def _client_phase(name: str) -> str:
    return CLIENT_OTHER if name == CLIENT_MESSAGE else name


@dataclass
class Profile:
    """Seconds per phase before the first round, in each round, and after the last; together they are the wall time.

    ``client_seconds`` sums each client span's own duration per round (clients working side by side each count).
    """

    wall_seconds: float
    start: dict[str, float] = field(default_factory=dict)
    rounds: dict[int, dict[str, float]] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    client_seconds: dict[int, dict[str, float]] = field(default_factory=dict)

    def phase_total(self) -> float:
        """The phases' seconds added up (equal to ``wall_seconds`` up to rounding)."""
        parts = [self.start, self.end, *self.rounds.values()]
        return sum(sum(part.values()) for part in parts)

    def round_seconds(self, server_round: int) -> float:
        return sum(self.rounds[server_round].values())

    def overhead(self, server_round: int) -> float:
        """A round's wall time outside client compute."""
        return self.round_seconds(server_round) - self.rounds[server_round].get(CLIENT_COMPUTE, 0.0)

    def median_round(self, rounds: Iterable[int]) -> dict[str, float]:
        """Per phase, the median of its seconds over ``rounds`` (0 where a round has none of it)."""
        chosen = [self.rounds[r] for r in rounds if r in self.rounds]
        phases = {phase for part in chosen for phase in part}
        return {phase: statistics.median(part.get(phase, 0.0) for part in chosen) for phase in phases} if chosen else {}

    def as_json(self) -> dict[str, Any]:
        return {
            "wall_seconds": self.wall_seconds,
            "start": self.start,
            "rounds": {str(r): phases for r, phases in sorted(self.rounds.items())},
            "end": self.end,
            "client_seconds": {str(r): phases for r, phases in sorted(self.client_seconds.items())},
        }

    @classmethod
    def from_json(cls, recorded: Mapping[str, Any]) -> Profile:
        """The profile ``as_json`` recorded."""
        return cls(
            wall_seconds=recorded["wall_seconds"],
            start=dict(recorded["start"]),
            rounds={int(r): dict(phases) for r, phases in recorded["rounds"].items()},
            end=dict(recorded["end"]),
            client_seconds={int(r): dict(phases) for r, phases in recorded["client_seconds"].items()},
        )


def _window(spans: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    for name in (LAUNCH, SERVER):
        outer = [s for s in spans if s["name"] == name]
        if outer:
            return min(s["start"] for s in outer), max(s["end"] for s in outer)
    raise ValueError("the profile holds neither a launch nor a server span")


def _round_starts(spans: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    starts: dict[int, float] = {}
    for s in spans:
        if s["name"] == SAMPLING and s.get("round") is not None:
            starts[s["round"]] = min(starts.get(s["round"], s["start"]), s["start"])
    return sorted((t, r) for r, t in starts.items())


def _phase_at(server_active: list[Mapping[str, Any]], clients: Counter, in_server: bool, before_server: bool) -> str:
    if not in_server:
        return STARTUP if before_server else SHUTDOWN
    names = [s["name"] for s in server_active]
    innermost = max(server_active, key=lambda s: (s["start"], -s["end"]))["name"]
    queries = [name for name in names if name in QUERY_PHASES]
    if queries:
        return queries[-1] if innermost in (EXCHANGE, *QUERY_PHASES) else innermost
    if innermost == EXCHANGE:
        busy = next((name for name in CLIENT_PRIORITY if clients[name] > 0), None)
        return _client_phase(busy) if busy else TRANSFER
    return OTHER if innermost == SERVER else innermost


def profile(spans: Sequence[Mapping[str, Any]]) -> Profile:
    """The run's wall time split into phases (see the module docstring)."""
    window_start, window_end = _window(spans)
    server_spans = [s for s in spans if s["name"] == SERVER]
    server_start = min((s["start"] for s in server_spans), default=window_end)
    server_end = max((s["end"] for s in server_spans), default=window_end)
    round_starts = _round_starts(spans)
    finish_start = min((s["start"] for s in spans if s["name"] == FINISH), default=server_end)
    inner = [s for s in spans if s["name"] != LAUNCH and window_start <= s["start"] < window_end]
    events = sorted(
        [(s["start"], 1, i) for i, s in enumerate(inner)]
        + [(s["end"], 0, i) for i, s in enumerate(inner)]
        + [(t, 2, -1) for t, _ in round_starts]
        + [(t, 2, -1) for t in (window_start, window_end, server_start, server_end, finish_start)]
    )
    result = Profile(wall_seconds=window_end - window_start)
    server_active: dict[int, Mapping[str, Any]] = {}
    clients: Counter = Counter()
    previous = window_start
    for instant, kind, index in events:
        instant = min(max(instant, window_start), window_end)
        if instant > previous:
            bounds = (server_start, server_end, finish_start)
            _credit(result, previous, instant, server_active, clients, bounds, round_starts)
            previous = instant
        if index < 0:
            continue
        s = inner[index]
        if s["name"] in CLIENT_SPANS:
            clients[s["name"]] += 1 if kind == 1 else -1
        elif kind == 1:
            server_active[index] = s
        else:
            server_active.pop(index, None)
    for s in inner:
        if s["name"] in CLIENT_SPANS:
            server_round = _round_of(s["start"], round_starts, finish_start)
            if server_round is not None:
                seconds = result.client_seconds.setdefault(server_round, defaultdict(float))
                seconds[_client_phase(s["name"])] += s["end"] - s["start"]
    result.client_seconds = {r: dict(phases) for r, phases in result.client_seconds.items()}
    return result


def _round_of(instant: float, round_starts: list[tuple[float, int]], finish_start: float) -> int | None:
    current = None
    for start, server_round in round_starts:
        if instant >= start:
            current = server_round
    return current if current is not None and instant < finish_start else None


def _credit(
    result: Profile,
    start: float,
    end: float,
    server_active: dict[int, Mapping[str, Any]],
    clients: Counter,
    bounds: tuple[float, float, float],
    round_starts: list[tuple[float, int]],
) -> None:
    server_start, server_end, finish_start = bounds
    in_server = server_start <= start < server_end and bool(server_active)
    phase = _phase_at(list(server_active.values()), clients, in_server, start < server_start)
    server_round = _round_of(start, round_starts, finish_start)
    if server_round is not None:
        part = result.rounds.setdefault(server_round, {})
    elif round_starts and start >= round_starts[0][0]:
        part = result.end
    else:
        part = result.start
    part[phase] = part.get(phase, 0.0) + (end - start)
