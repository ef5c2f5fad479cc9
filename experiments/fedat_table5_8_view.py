"""Table 5.8's view of the recorded cells: each cell's test accuracy on classes 0, 5 and 8 (absent from D_g) and the
mean over the seven D_g classes, for the initial model, the best round and the final round (the rows of
``class_accuracy.md``), from the cells' summary.json and rounds.jsonl:

    python -m experiments.fedat_table5_8_view
"""

from __future__ import annotations

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


def main() -> None:
    print("| cell | model | all | class 0 | class 5 | class 8 | mean of D_g's classes 1,2,3,4,6,7,9 |")
    print("|---|---|---|---|---|---|---|")
    for folder in FOLDERS:
        for cell in sorted((folder / "cells").glob("*")):
            if (cell / "summary.json").exists():
                print("\n".join(rows(cell)))


if __name__ == "__main__":
    main()
