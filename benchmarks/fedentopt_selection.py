"""FedEntOpt's selection: time per round at K clients, and cohort label entropy against random selection.

    python -m benchmarks.fedentopt_selection [--dataset fashion-mnist] [--rounds 200]

Timing: label counts of K clients with two labels each (#C=2), also with Laplace noise for label DP (ε = 0.5,
clipped at 0), M = 1% and 10% of K, buffer Q = 50% of K; per round, one call of ``select_fedentopt`` (the
server's whole per-round selection work) and one of ``select_fedentopt_reference`` (the greedy recomputing every
entropy at each step), alternating on the same counts with their own buffers and generators; both must select
the same clients. Medians over rounds; the slow reference runs fewer rounds at the largest sizes.
Entropy: the real label counts of K = 100 clients of the dataset (Dir(0.1) and #C=2 splits, public split
held out, as in a run), 10 clients per round; mean cohort entropy in bits for random and FedEntOpt
selection, against the paper's check log₂(C − 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections import deque
from pathlib import Path

import numpy as np

from benchmarks import RESULTS_DIR
from data.federated import FederatedSplit, load_client_partition
from strategies.fedentopt_selection import select_fedentopt, select_fedentopt_reference
from strategies.label_entropy import label_entropy_bits, labels_covered
from strategies.random_selection import select_random

# (K, M, label DP, rounds of the fast selection, rounds of the reference)
TIMING_CASES = [
    (100, 1, False, 50, 50),
    (100, 10, False, 50, 50),
    (1_000, 10, False, 50, 50),
    (1_000, 100, False, 50, 50),
    (10_000, 100, False, 20, 20),
    (10_000, 1_000, False, 20, 10),
    (10_000, 100, True, 20, 20),
    (10_000, 1_000, True, 20, 10),
    (100_000, 1_000, False, 10, 3),
]


def two_label_counts(num_clients: int, dp: bool, num_classes: int = 10) -> dict[int, np.ndarray]:
    """K clients holding two labels each (50 to 499 samples of each); with ``dp``, plus Lap(1/0.5) clipped at 0."""
    rng = np.random.default_rng(0)
    counts = np.zeros((num_clients, num_classes))
    for row in counts:
        row[rng.choice(num_classes, 2, replace=False)] = rng.integers(50, 500, 2)
    if dp:
        counts = np.clip(counts + rng.laplace(0.0, 1 / 0.5, counts.shape), 0.0, None)
    return {k: counts[k] for k in range(num_clients)}


def time_side_by_side(num_clients: int, size: int, dp: bool, rounds: int, reference_rounds: int) -> dict:
    """Median seconds per round of the fast and the reference selection, rounds alternating; same picks checked."""
    counts = two_label_counts(num_clients, dp)
    available = list(range(num_clients))
    capacity = num_clients // 2
    buffers: dict[str, deque[int]] = {"fast": deque(), "reference": deque()}
    rngs = {"fast": np.random.default_rng(0), "reference": np.random.default_rng(0)}
    select = {"fast": select_fedentopt, "reference": select_fedentopt_reference}
    times: dict[str, list[float]] = {"fast": [], "reference": []}
    for rnd in range(rounds):
        picks = {}
        for name in ("reference", "fast") if rnd < reference_rounds else ("fast",):
            tick = time.perf_counter()
            picks[name] = select[name](counts, available, size, buffers[name], capacity, rngs[name])
            times[name].append(time.perf_counter() - tick)
        if "reference" in picks and picks["reference"] != picks["fast"]:
            raise AssertionError(f"K={num_clients} M={size} round {rnd}: fast and reference selections differ")
    fast, reference = statistics.median(times["fast"]), statistics.median(times["reference"])
    return {
        "clients": num_clients,
        "per_round": size,
        "label_dp": dp,
        "rounds_fast": rounds,
        "rounds_reference": reference_rounds,
        "median_fast_seconds": fast,
        "median_reference_seconds": reference,
        "speedup": reference / fast,
    }


def cohort_entropy(dataset: str, partitioner: str, rounds: int, num_clients: int = 100) -> dict:
    split = FederatedSplit(dataset, "", partitioner, 0.1, 10, True, 2, 0.1, 0)
    counts = {
        k: np.bincount(load_client_partition(split, k, num_clients).labels, minlength=10).astype(float)
        for k in range(num_clients)
    }
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
            total = np.sum([counts[k] for k in cohort], axis=0)
            entropies.append(float(label_entropy_bits(total)))
            covered.append(labels_covered(total))
        result[policy] = {
            "mean_entropy_bits": statistics.mean(entropies),
            "min_entropy_bits": min(entropies),
            "mean_labels_covered": statistics.mean(covered),
        }
    return result


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "fedentopt_selection.json")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    timing = [time_side_by_side(*case) for case in TIMING_CASES]
    load = {
        "cpus": os.cpu_count(),
        "load_average_1min_before": load_before,
        "load_average_1min_after": os.getloadavg()[0],
    }
    entropy = {p: cohort_entropy(args.dataset, p, args.rounds) for p in ("dirichlet", "pathological")}
    report = {
        "selection_timing": timing,
        "machine_load": load,
        "cohort_entropy": entropy,
        "check_bits": math.log2(9),
        "dataset": args.dataset,
        "rounds": args.rounds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| K clients | M per round | counts | reference (rounds) | fast (rounds) | speed-up |")
    print("|---|---|---|---|---|---|")
    for row in timing:
        print(
            f"| {row['clients']:,} | {row['per_round']:,} | {'#C=2, DP ε=0.5' if row['label_dp'] else '#C=2'} | "
            f"{_ms(row['median_reference_seconds'])} ({row['rounds_reference']}) | "
            f"{_ms(row['median_fast_seconds'])} ({row['rounds_fast']}) | {row['speedup']:.1f}× |"
        )
    print(
        f"\n{args.dataset}, 100 clients, 10 per round, {args.rounds} rounds; check: log2(C-1) = {math.log2(9):.3f} bits"
    )
    print("| split | selection | mean cohort entropy (bits) | min | labels covered (mean) |\n|---|---|---|---|---|")
    for split, by_policy in entropy.items():
        for policy, r in by_policy.items():
            print(
                f"| {split} | {policy} | {r['mean_entropy_bits']:.3f} | {r['min_entropy_bits']:.3f} "
                f"| {r['mean_labels_covered']:.2f} |"
            )
    return report


if __name__ == "__main__":
    main()
