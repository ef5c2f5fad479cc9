"""Seconds per round of 10 FedAvg and 10 FedFT-EDS clients sharing one GPU in Flower's simulation.

    python -m benchmarks.gpu_round [--gpus-per-client 0.1] [--rounds 4] [--methods fedavg fedft-eds]

Each method is one ``python -m simulation`` run: WRN-16-1 on full Fashion-MNIST, Dir(0.1), 10 clients all taking
part, E = 5, pretrained on the server's public split (on the GPU, ``server-device = cuda``), clients on
``device = cuda`` with ``client-resources-num-gpus`` = ``--gpus-per-client`` (0.1 lets ten ClientApps train at once
on one GPU). Reported per method, over rounds 2 onwards (round 1 includes start-up and, for FedFT-EDS, the feature
cache): the median wall seconds of a round, the median of the round's summed client training seconds, and the
median of its slowest client's. Targets on an H100: FedAvg ≤ 5 s wall per round; FedFT-EDS ≤ 1 s of client
compute per round. Writes ``measurements/benchmarks/gpu_round.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks import RESULTS_DIR
from models.device import describe_available
from simulation.local_run import PROJECT_DIR

RESULTS = RESULTS_DIR / "gpu_round.json"


def round_figures(records: list[dict]) -> dict:
    """Medians over rounds 2 onwards of a run's rounds.jsonl records."""
    later = records[1:] or records
    return {
        "rounds": len(records),
        "round_1_seconds": records[0]["wall_seconds"] if records else None,
        "wall_seconds_median": statistics.median(r["wall_seconds"] for r in later) if later else None,
        "client_seconds_sum_median": statistics.median(r["client_train_seconds"] for r in later) if later else None,
        "slowest_client_seconds_median": statistics.median(
            max((s["train_seconds"] for s in r["client_stats"]), default=0.0) for r in later
        )
        if later
        else None,
        "best_accuracy": max((r["accuracy"] for r in records), default=None),
    }


def measure(method: str, rounds: int, gpus_per_client: float, results_dir: Path, log: Path) -> dict:
    overrides = (
        f"method='{method}' dataset='fashion-mnist' model='wrn-16-1' dirichlet-alpha=0.1 local-epochs=5 "
        f"num-server-rounds={rounds} device='cuda' server-device='cuda' results-dir='{results_dir}' "
        f"run-name='{method}'"
    )
    with log.open("wb") as handle:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "simulation",
                "--num-supernodes",
                "10",
                "--gpus-per-client",
                str(gpus_per_client),
                "--run-config",
                overrides,
            ],
            cwd=PROJECT_DIR,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    rounds_file = results_dir / method / "rounds.jsonl"
    records = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    return {"method": method, "exit_code": code, **round_figures(records)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["fedavg", "fedft-eds"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--gpus-per-client", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"no CUDA GPU here ({describe_available()}); this benchmark needs one", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [
            measure(m, args.rounds, args.gpus_per_client, Path(tmp), args.out.parent / f"gpu_round-{m}.log")
            for m in args.methods
        ]
    report = {"device": describe_available(), "gpus_per_client": args.gpus_per_client, "runs": runs}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{report['device']}; {args.gpus_per_client} GPU per client; medians of rounds 2-{args.rounds}")
    print("| method | wall s/round | client s/round (sum) | slowest client s | round 1 s | best acc. |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        if r["exit_code"] != 0 or not r["rounds"]:
            print(f"| {r['method']} | failed (exit code {r['exit_code']}) |")
            continue
        print(
            f"| {r['method']} | {r['wall_seconds_median']:.2f} | {r['client_seconds_sum_median']:.2f} | "
            f"{r['slowest_client_seconds_median']:.2f} | {r['round_1_seconds']:.1f} | {r['best_accuracy']:.4f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
