"""benchmarks/fedft_fedavg_gap.py on made-up cells: the three steps add up to FedFT-EDS − FedAvg on every seed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.fedft_fedavg_gap import decomposition, read_cells

LAST10 = {"fedavg": (0.50, 0.44), "fedft-all": (0.49, 0.43), "fedft-rds": (0.40, 0.37), "fedft-eds": (0.36, 0.32)}


def test_the_steps_sum_to_the_gap(tmp_path: Path) -> None:
    for method, per_seed in LAST10.items():
        for seed, value in enumerate(per_seed):
            folder = tmp_path / "cells" / f"{method}__seed{seed}"
            folder.mkdir(parents=True)
            summary = {"mean_last10_accuracy": value, "final_accuracy": value, "best_accuracy": value + 0.05}
            (folder / "summary.json").write_text(json.dumps(summary))
    cells = read_cells(tmp_path)
    assert cells["fedft-eds"][1]["last10"] == 0.32
    report = decomposition(cells)
    whole = report["pairs"]["fedft-eds - fedavg"]["last10"]
    assert whole["per_seed"] == report["steps_summed_per_seed"]["last10"] == [-14.0, -12.0]
    assert whole["ahead"] == 0 and whole["mean"] == -13.0
    assert report["pairs"]["fedft-rds-e40 - fedft-rds"]["last10"] is None  # arms not run are left out
