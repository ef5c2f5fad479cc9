"""Why SCAFFOLD trails FedAvg on the learns-task: the gap split into momentum, the uniform mean and the control
variates, paired by seed.

    python -m benchmarks.scaffold_gap [--seeds 0 1 2 3 4] [--rounds 4] [--epochs 1] [--alpha 0.5] [--cells DIR]

The learns-task of ``tests/learning.py`` (the setting of docs/methods/scaffold.md's table): Fashion-MNIST-mini over
4 clients Dir(α), LeNet-5 pretrained on 2,000 MNIST images with a new head, every client every round, batch 32,
learning rate 0.1, aggregation ``mean``; 4 rounds of 1 local epoch unless told otherwise. Each arm runs the real
ServerApp and ClientApp in this process and changes one thing (see ``ARMS``):

- ``fedavg``: FedAvg with the app's default momentum 0.5 (example-weighted mean);
- ``fedavg-m0``: FedAvg with plain SGD (momentum 0), SCAFFOLD's local optimiser;
- ``scaffold-no-c``: SCAFFOLD with the correction c − c_i replaced by zero in every local step: plain SGD and
  SCAFFOLD's uniform mean of the models; against ``fedavg-m0`` the one change is the uniform instead of the
  example-weighted mean, against ``scaffold`` the one change is the control variates;
- ``scaffold``: SCAFFOLD as the app runs it (option II, plain SGD, uniform mean);
- ``scaffold-m05``: SCAFFOLD whose local steps keep the momentum 0.5 (heavy-ball on the corrected gradient; option
  II's c_i⁺ still divides by K η_l): against ``scaffold`` the one change is the momentum.

The gap SCAFFOLD − FedAvg is the sum of (fedavg-m0 − fedavg): momentum, (scaffold-no-c − fedavg-m0): the uniform
mean, and (scaffold − scaffold-no-c): the control variates. Writes ``measurements/benchmarks/scaffold_gap.json`` (or
``--out``); ``measurements/benchmarks/scaffold_gap.md`` is written from it by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

import methods.scaffold.client_step as client_step
from benchmarks.paired_seeds import paired
from experiments.in_process import run_cell_in_process
from simulation.local_run import Resources

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "measurements" / "benchmarks" / "scaffold_gap.json"

#: tests/learning.py's TASK and tests/in_process.py's small_run_config values that are not the app's defaults.
TASK: dict[str, Any] = {
    "dataset": "fashion-mnist-mini",
    "model": "lenet5",
    "pretrain": "dataset",
    "pretrain-dataset": "mnist",
    "pretrain-samples": 2000,
    "pretrain-epochs": 3,
    "num-server-rounds": 4,
    "local-epochs": 1,
    "batch-size": 32,
    "aggregation": "mean",
    "dirichlet-alpha": 0.5,
    "min-partition-size": 5,
    "node-wait-seconds": 0.0,
    "client-threads": 1,
}
CLIENTS = 4

#: arm -> (run-config overrides, what is patched in SCAFFOLD's client step: None, "no-c" or "momentum")
ARMS: dict[str, tuple[dict[str, Any], str | None]] = {
    "fedavg": ({"method": "fedavg"}, None),
    "fedavg-m0": ({"method": "fedavg", "momentum": 0.0}, None),
    "scaffold-no-c": ({"method": "scaffold"}, "no-c"),
    "scaffold": ({"method": "scaffold"}, None),
    "scaffold-m05": ({"method": "scaffold"}, "momentum"),
}
#: the decomposition of SCAFFOLD − FedAvg, and the single-change pairs
PAIRS = (
    ("scaffold", "fedavg"),
    ("fedavg-m0", "fedavg"),
    ("scaffold-no-c", "fedavg-m0"),
    ("scaffold", "scaffold-no-c"),
    ("scaffold", "fedavg-m0"),
    ("scaffold-m05", "scaffold"),
    ("scaffold-m05", "fedavg"),
)


def zero_correction(c: Mapping[str, torch.Tensor], c_i: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The ``no-c`` arm's c − c_i: zero, so each local gradient is the plain one."""
    return {key: torch.zeros_like(c[key]) for key in c}


class Patches:
    """Switches SCAFFOLD's client step between the app's own and an arm's (the correction, the momentum)."""

    def __init__(self) -> None:
        self.original_correction = client_step.correction
        self.rule: str | None = None
        patches = self

        def replace(config: Any, **changes: Any) -> Any:
            if patches.rule == "momentum":
                changes.pop("momentum", None)  # keep the configured momentum
            return dataclasses.replace(config, **changes)

        def correction(c: Mapping[str, torch.Tensor], c_i: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            if patches.rule == "no-c":
                return zero_correction(c, c_i)
            return self.original_correction(c, c_i)

        client_step.dataclasses = SimpleNamespace(replace=replace)  # type: ignore[assignment]
        client_step.correction = correction


def run_arm(
    patches: Patches, arm: str, seed: int, setting: dict[str, Any], cells: Path, pretrained: Path
) -> dict[str, Any]:
    """One cell (kept in ``cells`` to resume): final, best and per-round accuracy."""
    tag = "__".join(f"{k}={v}" for k, v in sorted(setting.items()))
    name = f"{arm}__{tag}__seed{seed}"
    done = cells / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    overrides, patches.rule = ARMS[arm]
    config = {
        **TASK,
        **setting,
        **overrides,
        "seed": seed,
        "pretrain-cache-dir": str(pretrained),
        "feature-cache-dir": str(cells / "features"),
        "results-dir": str(cells),
        "run-name": name,
    }
    if run_cell_in_process(config, CLIENTS, Resources(), cells / f"{name}.log"):
        raise SystemExit(f"{name} failed: see {cells / name}.log")
    rounds = [json.loads(line) for line in (cells / name / "rounds.jsonl").read_text().splitlines() if line.strip()]
    accuracies = [r["accuracy"] for r in rounds]
    result = {"final": accuracies[-1], "best": max(accuracies), "by_round": accuracies}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--cells", type=Path, default=Path("/tmp/scaffold_gap_cells"), help="cells (resumable)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.cells.mkdir(parents=True, exist_ok=True)
    setting = {
        "num-server-rounds": args.rounds,
        "local-epochs": args.epochs,
        "dirichlet-alpha": args.alpha,
        "learning-rate": args.learning_rate,
    }
    patches = Patches()
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:
        for arm in args.arms:
            results[arm][seed] = run_arm(patches, arm, seed, setting, args.cells, args.cells / "pretrained")
            print(arm, seed, {k: v for k, v in results[arm][seed].items()}, flush=True)
    report: dict[str, Any] = {
        "setting": {**TASK, **setting},
        "command": (
            f"python -m benchmarks.scaffold_gap --rounds {args.rounds} --epochs {args.epochs} --alpha {args.alpha} "
            f"--learning-rate {args.learning_rate} --seeds " + " ".join(map(str, args.seeds))
        ),
        "cells": {arm: {str(s): r for s, r in per.items()} for arm, per in results.items()},
        "paired": {
            f"{arm} - {base}": {key: paired(results, arm, base, key) for key in ("final", "best")}
            for arm, base in PAIRS
            if arm in results and base in results
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
