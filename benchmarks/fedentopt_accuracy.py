"""FedEntOpt against random selection, alone and with FedProx (the FedEntOpt paper's Table I setting, scaled).

    python -m benchmarks.fedentopt_accuracy [--dataset fashion-mnist] [--rounds 40]

LeNet-5, K = 100 clients, 10% per round, E = 5, SGD lr 0.01 (× 0.98 per round), momentum 0.9, weight
decay 5e-4, batch 64, no pretraining; Dir(0.1) and #C=2 splits. Cells: FedAvg, FedAvg + FedEntOpt,
FedAvg + FedEntOpt with label DP ε = 0.5, FedProx (μ = 0.01), FedProx + FedEntOpt (buffer Q = 50%).
Reports the mean accuracy of the last 10 rounds (as the paper does), the best accuracy and the mean cohort
label entropy. Writes ``benchmarks/results/fedentopt_accuracy.md``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from benchmarks.cells import run_cells, write_report

VARIANTS = {
    "fedavg": {"method": "fedavg"},
    "fedavg+fedentopt": {"method": "fedavg", "client-selection": "fedentopt"},
    "fedavg+fedentopt-dp0.5": {"method": "fedavg", "client-selection": "fedentopt", "label-dp-epsilon": 0.5},
    "fedprox": {"method": "fedprox"},
    "fedprox+fedentopt": {"method": "fedprox", "client-selection": "fedentopt"},
}
SPLITS = {"dir0.1": {"partitioner": "dirichlet", "dirichlet-alpha": 0.1}, "c2": {"partitioner": "pathological", "classes-per-client": 2}}
PAPER = {"model": "lenet5", "pretrain": "none", "fraction-train": 0.1, "local-epochs": 5, "learning-rate": 0.01,
         "lr-decay": 0.98, "momentum": 0.9, "weight-decay": 5e-4, "batch-size": 64, "fedentopt-buffer": 0.5}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--results-dir", type=Path, default=Path("benchmarks/results/fedentopt_accuracy"))
    args = parser.parse_args(argv)
    cells = {f"{variant}-{split}": {**PAPER, **SPLITS[split], **over, "dataset": args.dataset, "num-server-rounds": args.rounds}
             for split in args.splits for variant, over in VARIANTS.items() if variant in args.variants}
    run_cells(cells, args.results_dir, num_supernodes=100)
    # The table lists every cell finished so far, also those of earlier invocations.
    summaries = {f"{v}-{sp}": json.loads((args.results_dir / f"{v}-{sp}" / "summary.json").read_text())
                 for sp in SPLITS for v in VARIANTS if (args.results_dir / f"{v}-{sp}" / "summary.json").exists()}
    lines = [f"{args.dataset}, LeNet-5, 100 clients, 10 per round, {args.rounds} rounds, one seed; "
             f"paper's check for cohort entropy: log2(C-1) = {math.log2(9):.3f} bits", "",
             "| split | method | mean acc. last 10 rounds | best acc. | mean cohort entropy (bits) |", "|---|---|---|---|---|"]
    for name, s in summaries.items():
        variant, split = name.rsplit("-", 1)
        lines.append(f"| {split} | {variant} | {s['mean_last10_accuracy']:.4f} | {s['best_accuracy']:.4f} | "
                     f"{s['mean_cohort_label_entropy']:.3f} |")
    write_report(lines, Path("benchmarks/results/fedentopt_accuracy.md"))


if __name__ == "__main__":
    main()
