"""Table 5.8's view of the recorded cells: each cell's test accuracy on classes 0, 5 and 8 (absent from D_g) and the
mean over the seven D_g classes, for the initial model, the best round and the final round (the rows of
``class_accuracy.md``), from the cells' summary.json and rounds.jsonl:

    python -m experiments.fedat_table5_8_view [--folder DIR] [--compare METHOD=BASELINE ...]

``--compare`` adds, per pair of cell labels, the final round's mean accuracy on classes 0, 5 and 8 of each seed and
their paired difference (the experiment's ``compare`` does this for all classes only).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from experiments.cell_results import read_cell
from experiments.class_accuracy import class_accuracy_rows, percent

MEASURED = Path(__file__).resolve().parents[1] / "measurements" / "experiments"
FOLDERS = [MEASURED / "fedat-table5-8", MEASURED / "fedat-table5-8-trained-teachers"]
ABSENT, GENERIC = (0, 5, 8), (1, 2, 3, 4, 6, 7, 9)


def rows(cell: Path) -> list[str]:
    """Markdown rows of one cell's folder: all classes, classes 0, 5, 8 and the D_g classes' mean, per model."""
    lines = []
    for label, accuracy, per_class in class_accuracy_rows(read_cell(cell)):
        known = [value for c in GENERIC if (value := per_class[c]) is not None]
        generic = sum(known) / len(known) if known else None
        values = [percent(accuracy), *(percent(per_class[c]) for c in ABSENT), percent(generic)]
        lines.append(f"| {cell.name} | {label} | " + " | ".join(values) + " |")
    return lines


def absent_final(cell: Path) -> float:
    """The final round's mean test accuracy (%) on classes 0, 5 and 8."""
    last = [r for r in read_cell(cell).rounds if r.get("class_accuracy") is not None][-1]
    return 100 * sum(last["class_accuracy"][c] for c in ABSENT) / len(ABSENT)


def paired_rows(folder: Path, method: str, baseline: str) -> list[str]:
    """Markdown rows: per grid point and seed both cells' final mean on classes 0, 5, 8 and the difference; then,
    per grid point with more than one seed, mean ± std (seeds of one setting, never across settings)."""
    lines: list[str] = []
    by_setting: dict[str, list[float]] = {}
    for cell in sorted((folder / "cells").glob(f"{method}__*")):
        other = cell.with_name(baseline + cell.name[len(method) :])
        if not ((cell / "summary.json").exists() and (other / "summary.json").exists()):
            continue
        ours, theirs = absent_final(cell), absent_final(other)
        setting, _, seed = cell.name[len(method) + 2 :].rpartition("__")
        by_setting.setdefault(setting, []).append(ours - theirs)
        where = f"{setting}, {seed}" if setting else seed
        lines.append(f"| {method} − {baseline} | {where} | {ours:.1f} | {theirs:.1f} | {ours - theirs:+.1f} |")
    for setting, differences in by_setting.items():
        if len(differences) > 1:
            mean, std = statistics.mean(differences), statistics.stdev(differences)
            ahead = f"{sum(d > 0 for d in differences)}/{len(differences)} ahead"
            where = f"{setting}, mean" if setting else "mean"
            lines.append(f"| {method} − {baseline} | {where} | | | {mean:+.1f} ± {std:.1f} ({ahead}) |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.fedat_table5_8_view", description=__doc__)
    parser.add_argument("--folder", type=Path, action="append", help="an experiment's results folder (repeatable)")
    parser.add_argument("--compare", action="append", default=[], metavar="METHOD=BASELINE")
    args = parser.parse_args(argv)
    folders = args.folder or FOLDERS
    print("| cell | model | all | class 0 | class 5 | class 8 | mean of D_g's classes 1,2,3,4,6,7,9 |")
    print("|---|---|---|---|---|---|---|")
    for folder in folders:
        for cell in sorted((folder / "cells").glob("*")):
            if (cell / "summary.json").exists():
                print("\n".join(rows(cell)))
    if args.compare:
        print("\n| method − baseline | setting, seed | method: final 0/5/8 (%) | baseline (%) | difference (pts) |")
        print("|---|---|---|---|---|")
        for pair in args.compare:
            method, _, baseline = pair.partition("=")
            for folder in folders:
                print("\n".join(paired_rows(folder, method, baseline)))


if __name__ == "__main__":
    main()
