"""Accuracy and learning efficiency of every FedFT-EDS-paper preset, one simulation each.

    python -m benchmarks.fedft_accuracy [--dataset fashion-mnist-mini] [--alphas 0.1 0.5] [--rounds 10]

10 clients, full participation, Dir(α), pretraining on the server's public split (the same cached
weights for every method), the paper's local settings (E = 5, SGD lr 0.1, momentum 0.5, batch 64).
Runs are resumable: a preset whose summary.json exists is not run again. Writes a Markdown table to
``benchmarks/results/fedft_accuracy.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from run_config.presets import METHODS
from benchmarks.cells import run_cells, write_report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--results-dir", type=Path, default=Path("benchmarks/results/fedft_accuracy"))
    args = parser.parse_args(argv)
    cells = {
        f"{method}-a{alpha}": {"method": method, "dataset": args.dataset, "dirichlet-alpha": alpha,
                               "num-server-rounds": args.rounds}
        for alpha in args.alphas for method in args.methods
    }
    summaries = run_cells(cells, args.results_dir, num_supernodes=10)
    rows = [(alpha, method, summaries[f"{method}-a{alpha}"])
            for alpha in args.alphas for method in args.methods if f"{method}-a{alpha}" in summaries]
    lines = [f"{args.dataset}, 10 clients, full participation, {args.rounds} rounds, WRN-16-1, pretrained on the public split",
             "", "| α | method | initial acc. | best acc. (round) | final acc. | client seconds | learning efficiency | MB down + up |",
             "|---|---|---|---|---|---|---|---|"]
    for alpha, method, s in rows:
        mb = (s["total_bytes_down"] + s["total_bytes_up"]) / 1e6
        lines.append(f"| {alpha} | {method} | {s['initial_accuracy']:.4f} | {s['best_accuracy']:.4f} ({s['best_round']}) | "
                     f"{s['final_accuracy']:.4f} | {s['total_client_train_seconds']:.1f} | {s['learning_efficiency']:.3f} | {mb:.1f} |")
    write_report(lines, Path("benchmarks/results/fedft_accuracy.md"))


if __name__ == "__main__":
    main()
