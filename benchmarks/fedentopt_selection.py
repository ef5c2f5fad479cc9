"""FedEntOpt's selection: time per round at K clients, and cohort label entropy against random selection.

    python -m benchmarks.fedentopt_selection [--dataset fashion-mnist] [--rounds 200]

Timing: label counts of K clients with two labels each (#C=2), M = 10% of K, buffer Q = 50% of K; the median
over rounds of one call of ``select_fedentopt`` (the server's whole per-round selection work).
Entropy: the real label counts of K = 100 clients of the dataset (Dir(0.1) and #C=2 splits, public split
held out, as in a run), 10 clients per round; mean cohort entropy in bits for random and FedEntOpt
selection, against the paper's check log₂(C − 1).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import deque
from pathlib import Path

import numpy as np

from data.federated import FederatedSplit, load_client_partition
from strategies.fedentopt_selection import select_fedentopt
from strategies.label_entropy import label_entropy_bits, labels_covered
from strategies.random_selection import select_random


def time_selection(num_clients: int, rounds: int, num_classes: int = 10) -> float:
    rng = np.random.default_rng(0)
    counts = {}
    for k in range(num_clients):
        vec = np.zeros(num_classes)
        vec[rng.choice(num_classes, 2, replace=False)] = rng.integers(50, 500, 2)
        counts[k] = vec
    buffer: deque[int] = deque()
    times = []
    for _ in range(rounds):
        tick = time.perf_counter()
        select_fedentopt(counts, list(range(num_clients)), num_clients // 10, buffer, num_clients // 2, rng)
        times.append(time.perf_counter() - tick)
    return statistics.median(times)


def cohort_entropy(dataset: str, partitioner: str, rounds: int, num_clients: int = 100) -> dict:
    split = FederatedSplit(dataset, "", partitioner, 0.1, 10, True, 2, 0.1, 0)
    counts = {k: np.bincount(load_client_partition(split, k, num_clients).labels, minlength=10).astype(float)
              for k in range(num_clients)}
    buffer: deque[int] = deque()
    rng = np.random.default_rng(0)
    result = {}
    for policy in ("random", "fedentopt"):
        entropies, covered = [], []
        for rnd in range(1, rounds + 1):
            if policy == "random":
                cohort = select_random(list(range(num_clients)), 10, 0, rnd)
            else:
                cohort = select_fedentopt(counts, list(range(num_clients)), 10, buffer, 50, rng)
            total = sum(counts[k] for k in cohort)
            entropies.append(float(label_entropy_bits(total)))
            covered.append(labels_covered(total))
        result[policy] = {"mean_entropy_bits": statistics.mean(entropies), "min_entropy_bits": min(entropies),
                          "mean_labels_covered": statistics.mean(covered)}
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fedentopt_selection.json"))
    args = parser.parse_args(argv)
    timing = {k: time_selection(k, rounds=20 if k >= 10_000 else 50) for k in (100, 1_000, 10_000)}
    entropy = {p: cohort_entropy(args.dataset, p, args.rounds) for p in ("dirichlet", "pathological")}
    report = {"median_selection_seconds": timing, "cohort_entropy": entropy, "check_bits": math.log2(9),
              "dataset": args.dataset, "rounds": args.rounds}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| K clients | M per round | median selection time |\n|---|---|---|")
    for k, t in timing.items():
        print(f"| {k:,} | {k // 10:,} | {1000 * t:.1f} ms |")
    print(f"\n{args.dataset}, 100 clients, 10 per round, {args.rounds} rounds; check: log2(C-1) = {math.log2(9):.3f} bits")
    print("| split | selection | mean cohort entropy (bits) | min | labels covered (mean) |\n|---|---|---|---|---|")
    for split, by_policy in entropy.items():
        for policy, r in by_policy.items():
            print(f"| {split} | {policy} | {r['mean_entropy_bits']:.3f} | {r['min_entropy_bits']:.3f} | {r['mean_labels_covered']:.2f} |")
    return report


if __name__ == "__main__":
    main()
