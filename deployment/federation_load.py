"""``python -m deployment.federation_load``: a federation of N SuperNodes under load, on this machine.

    python -m deployment.federation_load --nodes 5 10 25 50 [--rounds 20] [--per-round 10] [--restart-at 25]
    python -m deployment.federation_load --table        # the recorded figures; runs nothing
    python -m deployment.federation_load docs [--check] # docs/deployment.md's table again, from the recorded file

For each N: one SuperLink with TLS, SuperNode authentication and the loopback gate, and N SuperNodes, started with
the scripts a user runs (``deployment/loopback.py``), each node on its own exported partition of Fashion-MNIST-mini
(IID) with LeNet-5; then ``--rounds`` rounds of FedAvg and as many of FedFT-EDS (its defaults: the server's
pretraining, cached once for every N, and the pretraining round over every node), submitted with ``flwr run``.
Each round trains ``--per-round`` nodes (all of them when N is smaller; 0: all), so that the client work per round
stays the same and what grows with N is the federation the SuperLink serves. Per run it records: rounds aggregated,
updates lost (replies failed, rejected or timed out), round seconds (rounds.jsonl), the SuperLink process's CPU
seconds and peak RSS, the ServerApp's, each node's peak RSS (its SuperNode and the ClientApp it runs), and the peak
PSS of all the federation's processes together; processes are sampled every second. At N = ``--restart-at`` a third
run (FedAvg) has its SuperLink killed (``kill -9`` of its process group) once half its rounds are recorded, started
again with the same state folder, and the run submitted again with ``resume=true``: it must end with every round
aggregated exactly once. With ``--outsiders K`` (default 1), K more SuperNodes whose keys were never registered
start once the first run's first round is recorded, as devices the operator did not enrol: each must be refused at
activation and named (by its key) in the SuperLink's log, never given a node id or a message, while the N nodes
lose nothing. Figures go to ``measurements/deployment/federation_load.json`` as each N ends.

Everything runs on one machine, so the nodes' ClientApps share its cores with the SuperLink: round seconds are this
machine's, not a real federation's, and the load average is recorded beside each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployment.credentials import public_key_lines
from deployment.loopback import MARKER, PROJECT, LoopbackFederation, online, wait_for
from simulation.local_run import processes_marked

RESULTS = PROJECT / "measurements" / "deployment" / "federation_load.json"
DOCS_PAGE = PROJECT / "docs" / "deployment.md"
BLOCK_START, BLOCK_END = "<!-- federation-load:start -->", "<!-- federation-load:end -->"
#: The lean nodes' workload; ``settings`` adds the method, the rounds and the cohort.
WORKLOAD = (
    "model='lenet5' dataset='fashion-mnist-mini' partitioner='iid' local-epochs=1 client-threads=1 "
    "round-timeout=180.0 min-train-nodes=1"
)
METHODS = ("fedavg", "fedft-eds")
SAMPLE_SECONDS = 1.0
KIB_PER_MIB = 1024


def settings(method: str, num_nodes: int, rounds: int, per_round: int, pretrain_cache: Path, extra: str = "") -> str:
    """The run config text of one load run (``extra``: more settings, last)."""
    cohort = num_nodes if per_round <= 0 else min(per_round, num_nodes)
    return (
        f"{WORKLOAD} method='{method}' num-server-rounds={rounds} fraction-train={cohort / num_nodes} "
        f"pretrain-cache-dir='{pretrain_cache}' {extra}"
    ).strip()


# Sampling the federation's processes.
#: A process, as the kernel tells two apart: its PID and its start time (clock ticks after boot). ClientApps start
#: per message, so a PID comes back for another process.
ProcessKey = tuple[int, int]


@dataclass
class ProcessSample:
    key: ProcessKey
    group: int
    cpu_seconds: float
    rss_kib: int
    pss_kib: int
    command: str


def _sample(pid: int) -> ProcessSample | None:
    """One process's identity, group, CPU seconds, RSS and PSS (None when it is gone)."""
    proc = Path(f"/proc/{pid}")
    try:
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        status = (proc / "status").read_text()
        rollup = (proc / "smaps_rollup").read_text()
        command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    pss = next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    # fields[0] is the state (field 3 of stat): group is field 5, utime and stime 14 and 15, starttime 22
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    return ProcessSample((pid, int(fields[19])), int(fields[2]), cpu, rss, pss, command)


@dataclass
class Window:
    """Peaks and CPU over one run: per process kind (``superlink``, ``serverapp``, ``node-<i>``, ``other``).

    A process's CPU counts from its first sample in the window (0 for one born in it, its time so far for one that
    was running when the window opened) to its last: what it used after its last sample, less than a sampling
    period, is not counted, nor is a process that lived between two samples."""

    peak_rss_kib: dict[str, int] = field(default_factory=dict)
    peak_total_pss_kib: int = 0
    cpu_start: dict[ProcessKey, float] = field(default_factory=dict)
    cpu_last: dict[ProcessKey, float] = field(default_factory=dict)
    kind_of: dict[ProcessKey, str] = field(default_factory=dict)

    def cpu_seconds(self, kind: str) -> float:
        """CPU seconds the sampled processes of ``kind`` used inside the window."""
        return sum(self.cpu_last[key] - self.cpu_start[key] for key, k in self.kind_of.items() if k == kind)


class FederationSampler:
    """Samples every process of ``federation`` each second into the current ``Window``."""

    def __init__(self, federation: LoopbackFederation) -> None:
        self.federation = federation
        self.window = Window()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        #: Processes alive when the current window opened (their CPU counts from their time then).
        self._running: dict[ProcessKey, float] = {}
        self._kinds: dict[ProcessKey, str] = {}

    def _kind(self, sample: ProcessSample, node_groups: dict[int, str]) -> str:
        if "deployment.gated_superlink" in sample.command:
            return "superlink"
        if "flwr-serverapp" in sample.command:
            return "serverapp"
        return node_groups.get(sample.group, "other")

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.tick()

    def tick(self) -> None:
        with self._lock:  # sampled and committed at once: a window boundary never falls inside a tick
            samples = [s for pid in processes_marked(self.federation.marker, MARKER) if (s := _sample(pid))]
            groups = {
                pid: f"node-{i}" for i in range(self.federation.num_nodes) if (pid := self.federation.node_pid(i))
            }
            window, by_kind = self.window, dict[str, int]()
            for s in samples:
                if s.key not in self._kinds:
                    self._kinds[s.key] = self._kind(s, groups)
                kind = window.kind_of[s.key] = self._kinds[s.key]
                by_kind[kind] = by_kind.get(kind, 0) + s.rss_kib
                window.cpu_start.setdefault(s.key, self._running.get(s.key, 0.0))
                window.cpu_last[s.key] = s.cpu_seconds
            for kind, kib in by_kind.items():
                window.peak_rss_kib[kind] = max(window.peak_rss_kib.get(kind, 0), kib)
            window.peak_total_pss_kib = max(window.peak_total_pss_kib, sum(s.pss_kib for s in samples))

    def start(self) -> None:
        self._thread.start()

    def next_window(self) -> Window:
        """The window so far; a new one opens (processes already running count their CPU from now)."""
        self.tick()
        with self._lock:
            done, self.window = self.window, Window()
            self._running = dict(done.cpu_last)
        return done

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


# One run's figures.
def read_rounds(folder: Path) -> list[dict[str, Any]]:
    """The records of ``folder/rounds.jsonl`` (none while it does not exist)."""
    path = folder / "rounds.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


def read_status(folder: Path, since: float = 0.0) -> str | None:
    """summary.json's ``status`` (None while there is none, or it was written before ``since``, a ``time.time()``)."""
    path = folder / "summary.json"
    try:
        if path.stat().st_mtime < since:
            return None
        return str(json.loads(path.read_text())["status"])
    except (OSError, ValueError, KeyError):
        return None


def federated_rounds(folder: Path) -> int:
    """Federated rounds (round ≥ 1) recorded in ``folder/rounds.jsonl`` so far."""
    return sum(r["round"] >= 1 for r in read_rounds(folder))


def lost_updates(record: dict[str, Any]) -> int:
    """Updates a round asked for and did not aggregate: replies failed, rejected or timed out."""
    return sum(len(record.get(key) or []) for key in ("failed", "rejected", "timed_out"))


def round_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the federated rounds (round ≥ 1) of ``records`` add up to."""
    federated = [r for r in records if r["round"] >= 1]
    seconds = [r["wall_seconds"] for r in federated]
    numbers = [r["round"] for r in federated]
    return {
        "rounds_recorded": len(federated),
        "rounds_aggregated": sum(bool(r.get("aggregated")) for r in federated),
        "rounds_recorded_twice": len(numbers) - len(set(numbers)),
        "updates_asked": sum(len(r.get("clients") or []) for r in federated),
        "updates_lost": sum(lost_updates(r) for r in federated),
        "round_seconds_median": statistics.median(seconds) if seconds else None,
        "round_seconds_max": max(seconds) if seconds else None,
        "final_accuracy": federated[-1]["accuracy"] if federated else None,
    }


def pretraining_round_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The pretraining round's record (round 0), when the run had one: nodes asked and aggregated, updates lost,
    its seconds, and whether it was read from the cache (then its figures are those of the run that computed it)."""
    phase = next((r for r in records if r["round"] == 0), None)
    if phase is None:
        return {}
    return {
        "pretraining_round": {
            "asked": len(phase.get("clients") or []),
            "aggregated": len(phase.get("client_stats") or []),
            "lost": lost_updates(phase),
            "wall_seconds": round(phase["wall_seconds"], 1),
            "cached": bool(phase.get("cached")),
        }
    }


def window_figures(window: Window, num_nodes: int) -> dict[str, Any]:
    """The sampled figures of one run."""
    nodes = [window.peak_rss_kib.get(f"node-{i}", 0) / KIB_PER_MIB for i in range(num_nodes)]
    return {
        "superlink_cpu_seconds": round(window.cpu_seconds("superlink"), 1),
        "serverapp_cpu_seconds": round(window.cpu_seconds("serverapp"), 1),
        "superlink_peak_rss_mib": round(window.peak_rss_kib.get("superlink", 0) / KIB_PER_MIB, 1),
        "serverapp_peak_rss_mib": round(window.peak_rss_kib.get("serverapp", 0) / KIB_PER_MIB, 1),
        "node_peak_rss_mib_median": round(statistics.median(nodes), 1),
        "node_peak_rss_mib_max": round(max(nodes), 1),
        "total_peak_pss_gib": round(window.peak_total_pss_kib / 2**20, 2),
    }


#: How often a run's wait also asks Flower (``flwr ls``, seconds of imports) whether it finished without a summary.
FLOWER_STATUS_EVERY = 30.0


def wait_until_ended(
    federation: LoopbackFederation, run_name: str, run_id: str, timeout: float, since: float = 0.0
) -> str:
    """The run's summary status once it is written after ``since`` (completed, failed, interrupted); or, when Flower
    lists the run finished and no summary came (a ServerApp that died before writing one, as at N = 50 on 29 Nov),
    Flower's status and its reason."""
    folder = federation.results(run_name)
    asked = time.monotonic()

    def ended() -> str | None:
        nonlocal asked
        status = read_status(folder, since)
        if status is not None or time.monotonic() - asked < FLOWER_STATUS_EVERY:
            return status
        asked = time.monotonic()
        try:
            record = federation.run_record(run_id)
        except subprocess.TimeoutExpired:
            return None  # a SuperLink too busy to list its runs now: asked again later
        flower = str(record.get("status", ""))
        if not flower.startswith("finished") or _serverapp_running(federation):
            return None  # Flower can mark a starved ServerApp failed while it is still writing its summary
        return read_status(folder, since) or f"{flower}, no summary: {record.get('status-details', '')}"

    return str(wait_for(ended, timeout, f"{run_name} to end", every=2.0))


def measured_run(
    federation: LoopbackFederation, sampler: FederationSampler, method: str, text: str, timeout: float
) -> dict[str, Any]:
    """Submit one run, wait for its end, and return its figures."""
    sampler.next_window()
    load_before = os.getloadavg()[0]
    tick = time.monotonic()
    run_id = federation.submit(method, text)
    status = wait_until_ended(federation, method, run_id, timeout)
    wall = time.monotonic() - tick
    wait_for(lambda: not _serverapp_running(federation), 120, f"{method}'s ServerApp to end", every=1.0)
    window = sampler.next_window()
    records = read_rounds(federation.results(method))
    return {
        "run": method,
        "status": status,
        "wall_seconds": round(wall, 1),
        **round_figures(records),
        **pretraining_round_figures(records),
        **window_figures(window, federation.num_nodes),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        **({} if status == "completed" else why_not_completed(federation, run_id)),
    }


#: Lines of a run's ServerApp log kept when it did not complete.
LOG_TAIL_LINES = 40


def why_not_completed(federation: LoopbackFederation, run_id: str) -> dict[str, Any]:
    """The evidence of a run that did not complete, kept before the federation's folder goes: Flower's status and
    its reason, and the last lines of the ServerApp's log (``flwr log``)."""
    try:
        record = federation.run_record(run_id)
        log = federation.flwr("log", run_id, "deploy")
    except subprocess.TimeoutExpired as err:
        return {"evidence_error": f"flwr timed out: {err}"}
    lines = (log.stdout + log.stderr).splitlines()
    return {
        "flower_status": record.get("status"),
        "flower_status_details": record.get("status-details"),
        "serverapp_log_tail": lines[-LOG_TAIL_LINES:],
    }


def restarted_run(
    federation: LoopbackFederation, sampler: FederationSampler, text: str, rounds: int, timeout: float
) -> dict[str, Any]:
    """A FedAvg run whose SuperLink is killed once half its rounds are recorded, started again, and the run
    resubmitted with ``resume=true``; its figures, with how the restart went."""
    name = "fedavg-restart"
    results = federation.results(name)
    sampler.next_window()
    tick = time.monotonic()
    federation.submit(name, text)
    wait_for(lambda: federated_rounds(results) >= rounds // 2, timeout, f"round {rounds // 2} of {name}", every=1.0)
    killed_after = federated_rounds(results)
    listed = federation.listed_status()
    online_before = online(listed)
    federation.kill_superlink()
    down = time.monotonic()
    # The run's ServerApp and the SuperLink's SuperExec are in sessions of their own: they notice and stop.
    wait_for(lambda: not _serverapp_running(federation), 120, "the killed run's ServerApp to stop", every=1.0)
    federation.start_superlink()
    # superlink.db keeps a killed SuperLink's nodes "online" until two heartbeats (60 s) pass, so this does not wait
    # for the SuperNodes to reconnect: the resubmitted run's start waits for them (node-wait-seconds). It waits for
    # the nodes online before the kill, not for every node: one that had already stopped (at N = 25 on 28 Nov, a
    # SuperNode that got an HTTP 500 from the SuperLink) is named in the figures instead of stopping the script.
    federation.wait_online(online_before, timeout=180 + 4 * federation.num_nodes)
    back = time.monotonic()
    status_after_kill = read_status(results)
    resubmitted = time.time()
    run_id = federation.submit(name, f"{text} resume=true")
    status = wait_until_ended(federation, name, run_id, timeout, since=resubmitted)
    wait_for(lambda: not _serverapp_running(federation), 120, f"{name}'s ServerApp to end", every=1.0)
    window = sampler.next_window()
    online_after = online(federation.listed_status())
    records = read_rounds(results)
    return {
        "run": name,
        "status": status,
        "wall_seconds": round(time.monotonic() - tick, 1),
        "killed_after_rounds": killed_after,
        "nodes_online_before_the_kill": len(online_before),
        "nodes_online_after_the_run": len(online_after),
        "nodes_offline_before_the_kill": sorted(set(listed) - online_before),
        "status_after_kill": status_after_kill,
        "seconds_until_the_superlink_answered_again": round(back - down, 1),
        **round_figures(records),
        **pretraining_round_figures(records),
        **window_figures(window, federation.num_nodes),
    }


class OutsiderStarter(threading.Thread):
    """Starts every outsider once ``run_name``'s first federated round is recorded; ``error`` says why it did not
    (the wait timed out, a start script failed, or the run ended first: ``stop``)."""

    def __init__(self, federation: LoopbackFederation, run_name: str, timeout: float) -> None:
        super().__init__(daemon=True)
        self.federation, self.run_name, self.timeout = federation, run_name, timeout
        self.stopped = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        results = self.federation.results(self.run_name)
        try:
            wait_for(
                lambda: self.stopped.is_set() or federated_rounds(results) >= 1,
                self.timeout,
                f"round 1 of {self.run_name}",
            )
            if self.stopped.is_set():
                self.error = f"{self.run_name} ended before its first round was recorded"
                return
            for j in range(self.federation.outsiders):
                self.federation.start_outsider(j)
        except (AssertionError, RuntimeError, subprocess.TimeoutExpired) as err:
            self.error = str(err)[-500:]

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def outsider_figures(federation: LoopbackFederation) -> list[dict[str, Any]]:
    """For each outsider: whether the SuperLink's log names its key as refused, what its own log shows (Flower's
    exit code 305, a node id, a received message)."""
    link_log = (federation.link_state / "superlink.log").read_text(errors="replace")
    refused = [line for line in link_log.splitlines() if "No SuperNode found with the given public key" in line]
    figures = []
    for j in range(federation.outsiders):
        key = public_key_lines(federation.keys / f"supernode-{federation.num_nodes + j}.pub")
        own = federation.outsider_log(j)
        figures.append(
            {
                "refused_in_superlink_log": any(all(part in line for part in key) for line in refused),
                "exit_code_305": "Exit Code: 305" in own,
                "got_a_node_id": "SuperNode ID:" in own,
                "received_a_message": "Receiving:" in own,
            }
        )
    return figures


def _serverapp_running(federation: LoopbackFederation) -> bool:
    return any(
        (s := _sample(pid)) is not None and "flwr-serverapp" in s.command
        for pid in processes_marked(federation.marker, MARKER)
    )


def measure(
    num_nodes: int,
    rounds: int,
    per_round: int,
    restart: bool,
    pretrain_cache: Path,
    work: Path,
    extra: str = "",
    outsiders: int = 0,
) -> dict:
    """Every run at ``num_nodes`` SuperNodes (``extra`` settings added to each; ``outsiders`` unregistered nodes
    started during the first), and what starting the federation took."""
    federation = LoopbackFederation(work / f"n{num_nodes}", num_nodes, outsiders=outsiders)
    sampler = FederationSampler(federation)
    timeout = 600.0 + rounds * 300.0
    started: dict[str, Any] = {"nodes": num_nodes, "rounds": rounds, "per_round": per_round, "runs": []}
    during: OutsiderStarter | None = None
    if extra:
        started["settings"] = extra
    try:
        tick = time.monotonic()
        federation.start_superlink()
        federation.register_nodes()
        federation.start_nodes()
        federation.wait_all_online(timeout=180 + 4 * num_nodes)
        started["seconds_to_start"] = round(time.monotonic() - tick, 1)
        sampler.start()
        for index, method in enumerate(METHODS):
            text = settings(method, num_nodes, rounds, per_round, pretrain_cache, extra)
            if index == 0 and outsiders:
                during = OutsiderStarter(federation, method, timeout)
                during.start()
            started["runs"].append(measured_run(federation, sampler, method, text, timeout))
            print(json.dumps(started["runs"][-1]), flush=True)
            if during is not None:
                during.stop()
                if during.error is None:
                    started["outsiders"] = outsider_figures(federation)
                    started["nodes_listed"] = len(federation.listed_status())
                else:
                    started["outsiders_not_started"] = during.error
                during = None
        if restart:
            text = settings("fedavg", num_nodes, rounds, per_round, pretrain_cache, extra)
            started["runs"].append(restarted_run(federation, sampler, text, rounds, timeout))
            print(json.dumps(started["runs"][-1]), flush=True)
    except (AssertionError, RuntimeError, subprocess.TimeoutExpired) as err:
        started["error"] = str(err)[-2000:]
        print(f"N={num_nodes}: {started['error']}", file=sys.stderr)
    finally:
        if during is not None:  # a run failed while the outsiders waited: they must not start after close()
            during.stop()
        sampler.stop()
        leftovers = federation.close()
        started["processes_left_after_stop"] = len(leftovers)
    return started


# The table.
def table(recorded: dict[str, Any]) -> str:
    """The recorded figures as a Markdown table, one row per run."""
    lines = [
        "| SuperNodes | run | status | pretraining round: aggregated / asked (s) | rounds aggregated "
        "| updates lost / asked | round (s): median, max "
        "| SuperLink CPU (s) | SuperLink peak RSS (MiB) | ServerApp peak RSS (MiB) | node peak RSS, median / max (MiB) "
        "| all processes, peak PSS (GiB) | final accuracy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in recorded["cells"]:
        for run in cell["runs"]:
            killed = run.get("killed_after_rounds")
            restart = f" (SuperLink killed after round {killed}, resumed{_offline(run)}{_twice(run)})" if killed else ""
            lines.append(
                f"| {cell['nodes']} | {run['run']}{restart}{_settings(cell)} | {_status(run)} "
                f"| {_pretraining_round(run)} "
                f"| {run['rounds_aggregated']} of {cell['rounds']} | {run['updates_lost']} / {run['updates_asked']} "
                f"| {_number(run['round_seconds_median'], '.1f')}, {_number(run['round_seconds_max'], '.1f')} "
                f"| {run['superlink_cpu_seconds']:.0f} | {run['superlink_peak_rss_mib']:.0f} "
                f"| {run['serverapp_peak_rss_mib']:.0f} "
                f"| {run['node_peak_rss_mib_median']:.0f} / {run['node_peak_rss_mib_max']:.0f} "
                f"| {run['total_peak_pss_gib']:.2f} | {_number(run['final_accuracy'], '.1%')} |"
            )
        if "error" in cell:
            lines.append(f"| {cell['nodes']} | stopped: {cell['error'].splitlines()[-1][:160]} |")
    outsiders = [_outsiders(c) for c in recorded["cells"] if c.get("outsiders")]
    if outsiders:
        lines += [
            "",
            "SuperNodes with an unregistered key, started during the first run: " + "; ".join(outsiders) + ".",
        ]
    recorded_at = [
        f"N = {c['nodes']}{_settings(c)}: {c['commit']}, {c['date']}" for c in recorded["cells"] if "commit" in c
    ]
    if recorded_at:
        lines += ["", f"Recorded at (commit, date): {'; '.join(recorded_at)}."]
    return "\n".join(lines)


def _status(run: dict[str, Any]) -> str:
    """The run's status as the script saw it, with Flower's own and its reason where the run did not complete."""
    flower = run.get("flower_status")
    if flower is None:
        return str(run["status"])
    details = run.get("flower_status_details")
    return f"{run['status']} (Flower: {flower}" + (f', "{details}")' if details else ")")


def _number(value: float | None, spec: str) -> str:
    """``value`` formatted, or – for a run that recorded none (it ended before its first federated round)."""
    return "–" if value is None else format(value, spec)


def _outsiders(cell: dict[str, Any]) -> str:
    """What became of a cell's outsiders, counted."""
    found = cell["outsiders"]

    def count(key: str) -> str:
        return f"{sum(bool(o[key]) for o in found)} of {len(found)}"

    return (
        f"N = {cell['nodes']}{_settings(cell)}: {count('refused_in_superlink_log')} refused at activation with its "
        f"key named in the SuperLink's log, {count('exit_code_305')} ended with Flower's exit code 305, "
        f"{count('got_a_node_id')} got a node id, {count('received_a_message')} received a message; "
        f"{cell['nodes_listed']} nodes listed"
    )


def _offline(run: dict[str, Any]) -> str:
    """The nodes already offline when the SuperLink was killed, counted (the restart waits for the others only)."""
    offline = run.get("nodes_offline_before_the_kill")
    return f"; {len(offline)} node(s) already offline before the kill" if offline else ""


def _twice(run: dict[str, Any]) -> str:
    """Whether a resumed run aggregated a round again (it must not: each round once)."""
    twice = run.get("rounds_recorded_twice")
    return "" if twice is None else f"; {twice} round(s) recorded twice"


def _settings(cell: dict[str, Any]) -> str:
    return f" with `{cell['settings']}`" if cell.get("settings") else ""


def _pretraining_round(run: dict[str, Any]) -> str:
    phase = run.get("pretraining_round")
    if not phase:
        return "–"
    if phase["cached"]:
        return "from the cache"
    return f"{phase['aggregated']} / {phase['asked']} ({phase['wall_seconds']:.0f})"


def render(page: str, recorded: dict[str, Any]) -> str:
    """``page`` with the block between the markers replaced by the recorded table."""
    head, start, rest = page.partition(BLOCK_START)
    _, end, tail = rest.partition(BLOCK_END)
    if not start or not end:
        raise ValueError(f"{DOCS_PAGE.name}: no {BLOCK_START} ... {BLOCK_END} block")
    return f"{head}{start}\n\n{table(recorded)}\n\n{end}{tail}"


def docs(check: bool, results: Path = RESULTS, page_path: Path = DOCS_PAGE) -> int:
    """Write the recorded table into docs/deployment.md; with ``check``, only say whether it is up to date."""
    page = page_path.read_text()
    fresh = render(page, json.loads(results.read_text()))
    if fresh == page:
        return 0
    if check:
        print(f"{page_path} differs from {results}: run python -m deployment.federation_load docs", file=sys.stderr)
        return 1
    page_path.write_text(fresh)
    print(f"wrote {page_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["docs"]:
        if set(args_in[1:]) - {"--check"}:
            print("usage: python -m deployment.federation_load docs [--check]", file=sys.stderr)
            return 2
        return docs(check="--check" in args_in)
    parser = argparse.ArgumentParser(
        prog="python -m deployment.federation_load", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--nodes", type=int, nargs="+", default=[5, 10, 25, 50], help="federation sizes N")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-round", type=int, default=10, help="nodes trained a round (0: all)")
    parser.add_argument("--restart-at", type=int, default=25, help="the N whose third run restarts its SuperLink")
    parser.add_argument(
        "--outsiders", type=int, default=1, help="unregistered SuperNodes started during each N's first run"
    )
    parser.add_argument("--settings", default="", help='more run settings for every run, e.g. "pretrain-round=false"')
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true", help="print the recorded table; run nothing")
    args = parser.parse_args(args_in)
    if args.table:
        print(table(json.loads(args.out.read_text())))
        return 0
    if any(n < 1 for n in args.nodes) or args.rounds < 2 or args.outsiders < 0:
        parser.error("--nodes must be positive, --rounds at least 2 and --outsiders at least 0")
    recorded = json.loads(args.out.read_text()) if args.out.exists() else {"cells": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT, capture_output=True, text=True)
    with tempfile.TemporaryDirectory(prefix="federation-load-") as tmp:
        work = Path(tmp)
        for num_nodes in args.nodes:
            restart = num_nodes == args.restart_at
            cell = measure(
                num_nodes, args.rounds, args.per_round, restart, work / "pretrained", work, args.settings,
                args.outsiders,
            )  # fmt: skip
            cell.update(commit=commit.stdout.strip(), cpus=os.cpu_count(), date=time.strftime("%Y-%m-%d"))
            same = (num_nodes, args.settings)
            recorded["cells"] = [c for c in recorded["cells"] if (c["nodes"], c.get("settings", "")) != same] + [cell]
            recorded["cells"].sort(key=lambda c: c["nodes"])
            args.out.write_text(json.dumps(recorded, indent=1) + "\n")
    print(table(recorded))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
