"""Each class's test accuracy of the global model, per finished cell (``class_accuracy.md``): the initial model (from
summary.json), the best round and the final round (from rounds.jsonl), written only when some cell recorded it.

Rounds recorded before central evaluation kept each class's accuracy have no ``class_accuracy``: such cells are left
out. A class absent from the test set is shown as "–".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from experiments.cell_results import CellResult
from experiments.spec import Cell, Experiment

CLASS_ACCURACY_FILE = "class_accuracy.md"


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal; '–' for None (a class with no test image)."""
    return "–" if value is None else f"{100 * value:.1f}"


def class_accuracy_rows(result: CellResult) -> list[tuple[str, float | None, Sequence[float | None]]]:
    """(label, accuracy, per-class accuracies) for the initial model, the best round and the final round (one row
    when the best round is the last); empty when the cell's rounds do not record each class's accuracy."""
    rounds = [r for r in result.rounds if r.get("class_accuracy") is not None]
    if not rounds:
        return []
    rows: list[tuple[str, float | None, Sequence[float | None]]] = []
    initial = result.summary.get("initial_class_accuracy")
    if initial is not None:
        rows.append(("initial", result.summary.get("initial_accuracy"), initial))
    best = max(rounds, key=lambda r: r["accuracy"])
    last = rounds[-1]
    if best is last:
        rows.append((f"round {last['round']} (best, final)", last["accuracy"], last["class_accuracy"]))
    else:
        rows.append((f"round {best['round']} (best)", best["accuracy"], best["class_accuracy"]))
        rows.append((f"round {last['round']} (final)", last["accuracy"], last["class_accuracy"]))
    return rows


def class_accuracy_table(experiment: Experiment, results: Mapping[Cell, CellResult]) -> str | None:
    """A Markdown table, one row per cell and model (initial, best, final), one column per class (% of its test
    images); ``None`` when no cell recorded each class's accuracy."""
    lines: list[str] = []
    num_classes = 0
    for cell in experiment.cells:
        if cell not in results:
            continue
        for label, accuracy, per_class in class_accuracy_rows(results[cell]):
            num_classes = max(num_classes, len(per_class))
            lines.append(
                "| " + " | ".join([cell.name, label, percent(accuracy), *(percent(a) for a in per_class)]) + " |"
            )
    if not lines:
        return None
    header = ["cell", "model", "all", *(f"class {c}" for c in range(num_classes))]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *lines])


def write_class_accuracy_report(
    experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path
) -> list[Path]:
    """``class_accuracy.md`` when some finished cell recorded each class's accuracy; returns the files written."""
    table = class_accuracy_table(experiment, results)
    if table is None:
        return []
    path = directory / CLASS_ACCURACY_FILE
    text = [
        f"# {experiment.name}: test accuracy per class (%)",
        "",
        "The global model's accuracy on each class's test images: the initial model (pretrained, or as built), the "
        "round with the best overall accuracy and the final round. '–': no test image of that class.",
        "",
        table,
        "",
    ]
    path.write_text("\n".join(text))
    return [path]
