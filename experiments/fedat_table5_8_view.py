"""Table 5.8's view of the recorded cells: each cell's test accuracy on classes 0, 5 and 8 (absent from D_g) and the
mean over the seven D_g classes, for the initial model, the best round and the final round, from the cells'
summary.json and rounds.jsonl (class_accuracy):

    python -m experiments.fedat_table5_8_view
"""

from __future__ import annotations

import json
from pathlib import Path

MEASURED = Path(__file__).resolve().parents[1] / "measurements" / "experiments"
FOLDERS = [MEASURED / "fedat-table5-8", MEASURED / "fedat-table5-8-trained-teachers"]
ABSENT, GENERIC = (0, 5, 8), (1, 2, 3, 4, 6, 7, 9)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def rows(cell: Path) -> list[str]:
    summary = json.loads((cell / "summary.json").read_text())
    rounds = [json.loads(line) for line in (cell / "rounds.jsonl").read_text().splitlines()]
    best = max(rounds, key=lambda r: r["accuracy"])
    models = [("initial", summary["initial_accuracy"], summary["initial_class_accuracy"])]
    models += [(f"round {best['round']} (best)", best["accuracy"], best["class_accuracy"])]
    models += [(f"round {rounds[-1]['round']} (final)", rounds[-1]["accuracy"], rounds[-1]["class_accuracy"])]
    lines = []
    for label, accuracy, per_class in models:
        generic = sum(per_class[c] for c in GENERIC) / len(GENERIC)
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
