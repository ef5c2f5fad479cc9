"""One whole simulation (``python -m simulation`` of a checkout: SuperLink, Ray, ServerApp, ClientApp actors) as a
measured subprocess: wall time, peak memory of all its processes, and its results files.

The checkout may be another one (``project_dir``: e.g. the code before a change, in a second git worktree), so that
two versions can be measured side by side by the same harness. Every process of the run inherits a marker in its
environment, by which the sampler finds them; memory is summed over them every 0.5 s, both as resident set size (RSS:
shared pages counted in every process) and as proportional set size (PSS: shared pages divided among their users).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.process_memory import PeakMemory, pss_kib, rss_kib, simulation_kind
from run_config.text import format_overrides
from simulation.local_run import PROJECT_DIR, processes_marked, stop_found, stop_processes

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
    #: What the peak PSS is made of: MiB per process kind (``benchmarks.process_memory.simulation_kind``).
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
