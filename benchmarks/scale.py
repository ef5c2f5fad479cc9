"""Peak memory and seconds per round of whole simulations with 10, 100 and 1,000 clients.

    python -m benchmarks.scale [--clients 10 100 1000] [--per-round 10] [--rounds 3]

Each run is ``python -m simulation`` (a private SuperLink, Ray, the ServerApp and the ClientApp actors) on
full Fashion-MNIST, Dir(0.5) (the split Dir(0.1) cannot make for 1,000 clients of ≥ 10 samples), WRN-16-1
FedFT-EDS from random weights (scale is about the system, not accuracy), ``--per-round`` clients per round.
Every process of the run carries a marker in its environment; their proportional set size (PSS, shared
pages divided among the processes sharing them) is summed every 0.5 s, and the peak is reported with the
peak number of Ray ClientApp actors, what the peak is made of (per process kind) and the load average before and
after. Seconds per round come from rounds.jsonl (wall time per round).
Writes ``measurements/benchmarks/scale.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks import RESULTS_DIR
from benchmarks.process_memory import PeakMemory, pss_kib, simulation_kind
from simulation.local_run import PROJECT_DIR, processes_marked

MARKER = "FEDFT_SCALE_BENCHMARK"


def _is_actor(pid: int) -> bool:
    return simulation_kind(pid) == "client actor"


#: The scale benchmark's workload (``measure``'s default): full Fashion-MNIST, Dir(0.5), WRN-16-1 FedFT-EDS from
#: random weights.
SCALE_WORKLOAD = "dataset='fashion-mnist' dirichlet-alpha=0.5 pretrain='none' method='fedft-eds'"


def measure(
    num_clients: int,
    per_round: int,
    rounds: int,
    cpus_per_client: int,
    results_dir: Path,
    log_dir: Path,
    workload: str = SCALE_WORKLOAD,
    name: str = "",
) -> dict:
    """One simulation of ``workload`` (run-config text); its peak memory (and what it is made of), actor count
    and per-round wall seconds (its log in ``log_dir``)."""
    name = name or f"scale-{num_clients}"
    overrides = (
        f"{workload} fraction-train={per_round / num_clients} num-server-rounds={rounds} "
        f"results-dir='{results_dir}' run-name='{name}' node-wait-seconds=900.0"
    )
    marker = uuid.uuid4().hex
    sampler = PeakMemory(
        lambda: processes_marked(marker, variable=MARKER), pss_kib, counted=_is_actor, kind=simulation_kind
    )
    load_before = os.getloadavg()
    sampler.start()
    tick = time.perf_counter()
    with (log_dir / f"{name}-{cpus_per_client}cpu.log").open("wb") as log:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "simulation",
                "--num-supernodes",
                str(num_clients),
                "--cpus-per-client",
                str(cpus_per_client),
                "--run-config",
                overrides,
            ],
            cwd=PROJECT_DIR,
            env={**os.environ, MARKER: marker},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    total = time.perf_counter() - tick
    sampler.stop()
    rounds_file = results_dir / name / "rounds.jsonl"
    records = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    later = [r["wall_seconds"] for r in records[1:]]
    return {
        "clients": num_clients,
        "clients_per_round": per_round,
        "cpus_per_client": cpus_per_client,
        "exit_code": code,
        "peak_memory_gib": sampler.peak_total_kib / 2**20,
        "peak_by_kind_mib": {kind: round(kib / 1024, 1) for kind, kib in sampler.peak_by_kind_kib.items()},
        "peak_actors": sampler.peak_counted,
        "peak_processes": sampler.peak_processes,
        "round_1_seconds": records[0]["wall_seconds"] if records else None,
        "later_round_seconds_median": statistics.median(later) if later else None,
        "total_seconds": total,
        "final_accuracy": records[-1]["accuracy"] if records else None,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus-per-client", type=int, default=1, help="Ray CPUs per ClientApp actor")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "scale.json")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results = [
            measure(n, args.per_round, args.rounds, args.cpus_per_client, Path(tmp), args.out.parent)
            for n in args.clients
        ]
    args.out.write_text(json.dumps({"cpus": os.cpu_count(), "runs": results}, indent=1) + "\n")
    print(
        "| clients | per round | CPUs per client | peak memory (GiB, PSS) | Ray actors | round 1 (s) "
        "| later rounds, median (s) | whole run (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if r["exit_code"] != 0:
            print(f"| {r['clients']} | failed with exit code {r['exit_code']} |")
            continue
        print(
            f"| {r['clients']} | {r['clients_per_round']} | {r['cpus_per_client']} | {r['peak_memory_gib']:.2f} "
            f"| {r['peak_actors']} | "
            f"{r['round_1_seconds']:.1f} | {r['later_round_seconds_median']:.1f} | {r['total_seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
