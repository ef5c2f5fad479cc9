"""What leaving out the entropy pass saves a client whose data selection does not need it.

    python -m benchmarks.entropy_pass [--model lenet5] [--rounds 7] [--threads 1]

The client's round (``client_app.local_update.local_update``, what the ClientApp runs) for FedAvg, FedFT on all data
and FedFT-RDS, each with ``entropy-metrics`` off (the default: no entropy pass) and on (the pass over all local
data that every round ran before), timed as wall seconds on the same partition from the same global model, the two
interleaved round by round so that machine noise hits them alike. Reported: medians over rounds 2.. (round 1 builds
FedFT's feature cache), their ratio, and the machine's load. Writes ``measurements/benchmarks/entropy_pass.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR
from benchmarks.client_workload import client_round
from client_app.feature_cache import FeatureCache
from client_app.local_data import load_local_data
from methods.registry import default_config
from run_config import build_model_for, federated_split

METHODS = ("fedavg", "fedft-all", "fedft-rds")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--num-partitions", type=int, default=10)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a simulated client gets 1 core)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "entropy_pass.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = torch.device("cpu")
    base = dict(
        dataset=args.dataset,
        model=args.model,
        partitioner="iid",
        pretrain="none",
        local_epochs=args.local_epochs,
        batch_size=args.batch_size,
    )
    variants = {(m, on): default_config(**base, method=m, entropy_metrics=on) for m in METHODS for on in (False, True)}
    data = load_local_data(federated_split(variants[(METHODS[0], False)]), args.partition, args.num_partitions)
    global_state = build_model_for(variants[(METHODS[0], False)], seed=0).state_dict()
    caches = {key: FeatureCache(2**30) for key in variants}
    seconds: dict[tuple[str, bool], list[float]] = {key: [] for key in variants}
    loads = []
    for rnd in range(1, args.rounds + 1):
        loads.append(os.getloadavg()[0])
        for key, config in variants.items():
            _, wall = client_round(config, global_state, data, rnd, args.partition, device, caches[key])
            seconds[key].append(wall)
    rows = {}
    for method in METHODS:
        without, with_pass = (statistics.median(seconds[(method, on)][1:]) for on in (False, True))
        rows[method] = {"without_pass_s": without, "with_pass_s": with_pass, "ratio": without / with_pass}
    report = {
        "setting": {**base, "local_samples": len(data), "rounds": args.rounds, "torch_threads": args.threads},
        "machine": platform.processor() or platform.machine(),
        "load_average_1min": {"min": min(loads), "max": max(loads)},
        "median_round_seconds": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{len(data)} local samples, {args.model}, E={args.local_epochs}, batch {args.batch_size}; load {loads}")
    print("| method | round without the pass (s) | with it (s) | ratio |\n|---|---|---|---|")
    for method, row in rows.items():
        print(f"| {method} | {row['without_pass_s']:.3f} | {row['with_pass_s']:.3f} | {row['ratio']:.2f} |")
    return report


if __name__ == "__main__":
    main()
