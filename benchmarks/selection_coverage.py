"""Which local samples FedFT-EDS and FedFT-RDS train on over a run: how much of each client's data the 10%
selections reach, how much consecutive rounds repeat, and how many classes a round's selection holds.

    python -m benchmarks.selection_coverage [--seeds 0 1 2] [--rounds 10]

Runs `make run`'s setting (``experiments/default_run.yaml``'s start: WRN-16-1 pretrained on MNIST, 10 Fashion-MNIST
clients Dir(0.1)) in this process with the ClientApp's own ``local_update``, once with entropy and once with random
selection per seed, and records each client's selected indices every round. Writes
``measurements/benchmarks/selection_coverage.json``. The question it answers: does random selection, redrawn each
round, cover more of a small local set than the entropy ranking, which keeps returning to the samples the model finds
hardest?
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

import client_app.local_update as update_module
import client_app.train_step as train_step_module
from benchmarks import RESULTS_DIR
from experiments.in_process import run_cell_in_process
from simulation.local_run import Resources

#: (partition, round) -> (selected indices, labels of the client's samples), filled while a run goes.
Selections = dict[tuple[int, int], tuple[list[int], list[int]]]


def record_selections(selections: Selections) -> None:
    """Wrap the ClientApp's ``local_update`` and the two selection functions so that every round's choice is kept."""
    original_update = update_module.local_update
    original_scored, original_unscored = update_module.select_samples, update_module.select_unscored
    current: dict[str, Any] = {}

    def keep(chosen: torch.Tensor) -> torch.Tensor:
        selections[(current["partition"], current["round"])] = (chosen.cpu().tolist(), current["labels"])
        return chosen

    def local_update(model, data, config, **kw):
        current.update(partition=kw["partition_id"], round=kw["server_round"], labels=data.labels.tolist())
        return original_update(model, data, config, **kw)

    update_module.select_samples = lambda *a: keep(original_scored(*a))
    update_module.select_unscored = lambda *a: keep(original_unscored(*a))
    train_step_module.local_update = local_update


def coverage(selections: Selections, rounds: int) -> dict[str, float]:
    """Means over clients: the share of local samples selected at least once over the run, the overlap (Jaccard) of
    consecutive rounds' selections, and the classes in a round's selection against the classes the client holds."""
    by_client: dict[int, dict[int, list[int]]] = defaultdict(dict)
    labels: dict[int, list[int]] = {}
    for (partition, rnd), (chosen, client_labels) in selections.items():
        by_client[partition][rnd] = chosen
        labels[partition] = client_labels
    reached: list[float] = []
    overlap: list[float] = []
    classes: list[float] = []
    for partition, per_round in by_client.items():
        n = len(labels[partition])
        seen = set().union(*map(set, per_round.values()))
        reached.append(len(seen) / n)
        for rnd in range(2, rounds + 1):
            if rnd in per_round and rnd - 1 in per_round:
                a, b = set(per_round[rnd - 1]), set(per_round[rnd])
                overlap.append(len(a & b) / len(a | b))
        held = len(set(labels[partition]))
        classes.extend(len({labels[partition][i] for i in chosen}) / held for chosen in per_round.values())
    return {
        "share_of_local_data_reached": statistics.mean(reached),
        "consecutive_round_overlap": statistics.mean(overlap),
        "share_of_held_classes_in_a_round": statistics.mean(classes),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "selection_coverage.json")
    args = parser.parse_args(argv)
    selections: Selections = {}
    record_selections(selections)
    report: dict[str, Any] = {"setting": "make run's (fedft-eds, P_ds 10%) and fedft-rds", "runs": {}}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            for method in ("fedft-eds", "fedft-rds"):
                selections.clear()
                overrides = {
                    "method": method,
                    "seed": seed,
                    "num-server-rounds": args.rounds,
                    "client-threads": 1,
                    "results-dir": folder,
                    "run-name": f"{method}-{seed}",
                }
                code = run_cell_in_process(overrides, 10, Resources(), Path(folder) / f"{method}-{seed}.log")
                if code:
                    raise SystemExit(f"{method} seed {seed} failed: see its log")
                report["runs"][f"{method} seed {seed}"] = coverage(selections, args.rounds)
                print(method, seed, report["runs"][f"{method} seed {seed}"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
