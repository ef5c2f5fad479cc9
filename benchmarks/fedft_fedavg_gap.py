"""FedFT-EDS − FedAvg on the default run, split into its steps, from the cells of ``experiments/fedft_fedavg_gap.yaml``.

    python -m experiments run experiments/fedft_fedavg_gap.yaml --in-process \\
        --results-dir measurements/experiments/fedft-fedavg-gap          # the cells (resumable)
    python -m benchmarks.fedft_fedavg_gap                               # this: the decomposition, as JSON

On each seed FedFT-EDS − FedAvg is exactly the sum of three paired steps, each changing one thing: FedFT-all − FedAvg
(φ frozen up to the middle level, all local data both), FedFT-RDS − FedFT-all (a random 10% a round instead of all
local data, θ only both) and FedFT-EDS − FedFT-RDS (the entropy ranking instead of the random draw). Beside them the
ablations of the same file: fewer frozen layers at 10% (freeze low, none), and 40 local epochs at 10% (about the
optimiser steps a round of FedFT-all), each against the arm it changes. Per pair: the per-seed differences (points),
their mean ± sample sd and the seeds on which the first arm is ahead, for the last-10 mean, the final and the best
round. It runs nothing. Writes ``measurements/experiments/fedft_vs_fedavg.json`` (or ``--out``;
``fedft_vs_fedavg.md`` beside it is written from it by hand).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.paired_seeds import paired

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "measurements" / "experiments" / "fedft-fedavg-gap"
OUT = ROOT / "measurements" / "experiments" / "fedft_vs_fedavg.json"
#: the three steps from FedAvg to FedFT-EDS; their per-seed sum is FedFT-EDS − FedAvg
STEPS = (("fedft-all", "fedavg"), ("fedft-rds", "fedft-all"), ("fedft-eds", "fedft-rds"))
#: the ablations, each against the arm it changes (and the 40-epoch arms against all local data)
ABLATIONS = (
    ("fedft-eds", "fedavg"),
    ("fedft-eds-low", "fedft-eds"),
    ("fedft-eds-none", "fedft-eds"),
    ("fedavg-rds", "fedft-rds"),
    ("fedavg-rds", "fedavg"),
    ("fedft-eds-none", "fedavg"),
    ("fedft-rds-e40", "fedft-rds"),
    ("fedft-rds-e40", "fedft-all"),
    ("fedft-eds-e40", "fedft-eds"),
    ("fedft-eds-e40", "fedft-rds-e40"),
    ("fedft-eds-e40", "fedavg"),
)
FIELDS = {"last10": "mean_last10_accuracy", "final": "final_accuracy", "best": "best_accuracy"}


def read_cells(folder: Path) -> dict[str, dict[int, dict[str, float]]]:
    """method -> seed -> the compared fields of every finished cell."""
    cells: dict[str, dict[int, dict[str, float]]] = {}
    for summary in sorted((folder / "cells").glob("*__seed*/summary.json")):
        method, seed = summary.parent.name.rsplit("__seed", 1)
        values = json.loads(summary.read_text())
        cells.setdefault(method, {})[int(seed)] = {key: float(values[field]) for key, field in FIELDS.items()}
    return cells


def paired_where_run(
    cells: dict[str, dict[int, dict[str, float]]], arm: str, base: str, key: str
) -> dict[str, Any] | None:
    """``paired`` over the seeds both arms ran; None where no seed has both."""
    if not set(cells.get(arm, {})) & set(cells.get(base, {})):
        return None
    return paired(cells, arm, base, key)


def decomposition(cells: dict[str, dict[int, dict[str, float]]]) -> dict[str, Any]:
    """The steps and the ablations, each field paired; the steps' per-seed sums, which equal the whole gap."""
    pairs = {f"{a} - {b}": {key: paired_where_run(cells, a, b, key) for key in FIELDS} for a, b in (*STEPS, *ABLATIONS)}
    sums = {}
    for key in FIELDS:
        parts = [pairs[f"{a} - {b}"][key] for a, b in STEPS]
        if all(parts) and len({tuple(p["seeds"]) for p in parts if p}) == 1:
            sums[key] = [round(sum(vals), 2) for vals in zip(*(p["per_seed"] for p in parts if p), strict=True)]
    return {"pairs": pairs, "steps": [f"{a} - {b}" for a, b in STEPS], "steps_summed_per_seed": sums}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--folder", type=Path, default=FOLDER)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    report = {"command": "python -m benchmarks.fedft_fedavg_gap", **decomposition(read_cells(args.folder))}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, fields in report["pairs"].items():
        if fields["last10"]:
            summary = {k: (v["per_seed"], v["mean"], v["sd"], v["ahead"]) for k, v in fields.items() if v}
            print(name, summary)
    print("steps summed per seed", report["steps_summed_per_seed"])
    return report


if __name__ == "__main__":
    main()
