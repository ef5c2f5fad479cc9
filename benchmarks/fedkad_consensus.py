"""Where FedKAD's prototype term pays: its gain over FedMD (the same distillation without it) beside how often the
baseline's consensus names the true class, per seed and α, from recorded cells.

    python -m experiments run experiments/fedkad_alpha.yaml --in-process \\
        --results-dir measurements/experiments/fedkad-alpha               # the cells (resumable)
    python -m benchmarks.fedkad_consensus [--folder measurements/experiments/fedkad-alpha]

The thesis's mechanism (§5.5-5.6): the consensus of drifted client models is unreliable, and the global prototype
feature maps correct the negative knowledge transfer it causes, so FedKAD should gain where FedMD's consensus is
poor and not where it is good. Each round of a FedKAD or FedMD cell records ``consensus_accuracy``: the share of the
round's D_g draw (the server's held-out Fashion-MNIST images, whose labels the methods never use) on which the
consensus's argmax is the true class. This reads, per α and seed: the global model's best and final accuracy of
``fedkad`` and ``fedmd-thesis`` and their difference, the baseline's consensus accuracy (mean over the rounds, and
the last round's), FedKAD's own, and the consensus's gain under FedKAD; then the Pearson and Spearman correlations,
over all (α, seed) pairs, of the best-accuracy gain with the baseline's consensus accuracy. It runs nothing.
Writes ``measurements/experiments/fedkad_consensus.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "measurements" / "experiments" / "fedkad-alpha"
OUT = ROOT / "measurements" / "experiments" / "fedkad_consensus.json"
METHOD, BASELINE = "fedkad", "fedmd-thesis"


def read_cell(folder: Path) -> dict[str, Any]:
    """A cell's global accuracies and its consensus accuracy per round."""
    rows = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines() if line.strip()]
    accuracy = [r["accuracy"] for r in rows]
    consensus = [r["consensus_accuracy"] for r in rows]
    return {
        "best": max(accuracy),
        "final": accuracy[-1],
        "consensus_mean": statistics.mean(consensus),
        "consensus_final": consensus[-1],
    }


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def pearson(a: list[float], b: list[float]) -> float:
    ma, mb = statistics.mean(a), statistics.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else float("nan")


def spearman(a: list[float], b: list[float]) -> float:
    return pearson(ranks(a), ranks(b))


def study(folder: Path) -> dict[str, Any]:
    """Every (α, seed) with both cells finished: the gain and the consensus accuracies (points), and correlations."""
    cells = folder / "cells"
    rows = []
    for method_dir in sorted(cells.glob(f"{METHOD}__dirichlet-alpha=*__seed*")):
        _, point, seed = method_dir.name.split("__")
        base_dir = cells / f"{BASELINE}__{point}__{seed}"
        if not (method_dir / "summary.json").exists() or not (base_dir / "summary.json").exists():
            continue
        method, base = read_cell(method_dir), read_cell(base_dir)
        rows.append(
            {
                "alpha": float(point.split("=")[1]),
                "seed": int(seed.removeprefix("seed")),
                "gain_best": round(100 * (method["best"] - base["best"]), 2),
                "gain_final": round(100 * (method["final"] - base["final"]), 2),
                "baseline_consensus_mean": round(100 * base["consensus_mean"], 2),
                "baseline_consensus_final": round(100 * base["consensus_final"], 2),
                "fedkad_consensus_mean": round(100 * method["consensus_mean"], 2),
                "consensus_gain_mean": round(100 * (method["consensus_mean"] - base["consensus_mean"]), 2),
            }
        )
    gains = [r["gain_best"] for r in rows]
    consensus = [r["baseline_consensus_mean"] for r in rows]
    return {
        "rows": rows,
        "pearson_gain_best_vs_baseline_consensus": round(pearson(gains, consensus), 3) if len(rows) > 2 else None,
        "spearman_gain_best_vs_baseline_consensus": round(spearman(gains, consensus), 3) if len(rows) > 2 else None,
        "pearson_gain_best_vs_consensus_gain": (
            round(pearson(gains, [r["consensus_gain_mean"] for r in rows]), 3) if len(rows) > 2 else None
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--folder", type=Path, default=FOLDER, help="an experiment folder with fedkad and fedmd-thesis")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    folder = str(args.folder.relative_to(ROOT)) if args.folder.is_relative_to(ROOT) else str(args.folder)
    report = {"command": f"python -m benchmarks.fedkad_consensus --folder {folder}", **study(args.folder)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for row in report["rows"]:
        print(row)
    print({k: v for k, v in report.items() if k.startswith(("pearson", "spearman"))})
    return report


if __name__ == "__main__":
    main()
