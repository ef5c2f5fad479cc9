"""Each class's test accuracy of the global model, per finished cell (``class_accuracy.md``): the initial model (from
summary.json), the best round and the final round (from rounds.jsonl), written only when some cell recorded it.

Rounds recorded before central evaluation kept each class's accuracy have no ``class_accuracy``: such cells are left
out. A class absent from the test set is shown as "–". ``report --classes`` prints a view of some classes against the
rest (``classes_view``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from experiments.cell_results import CellResult
from experiments.spec import Cell, Experiment, point_label

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


def _classes_mean(per_class: Sequence[float | None], classes: Sequence[int]) -> float | None:
    known = [value for c in classes if c < len(per_class) and (value := per_class[c]) is not None]
    return sum(known) / len(known) if known else None


def classes_view(
    experiment: Experiment,
    results: Mapping[Cell, CellResult],
    classes: Sequence[int],
    pairs: Mapping[str, str],
) -> str:
    """Markdown (``report --classes``): per finished cell and model (initial, best, final), the accuracy on each of
    ``classes`` and the mean over the other classes (the thesis's Table 5.8 asks after the classes absent from FedAT's
    D_g); then, per ``pairs`` method -> baseline, the final round's mean over ``classes`` on each seed both finished,
    and the difference, with mean ± std over the seeds of one grid point."""
    num_classes = max(
        (len(per_class) for result in results.values() for _, _, per_class in class_accuracy_rows(result)), default=0
    )
    others = [c for c in range(num_classes) if c not in classes]
    header = ["cell", "model", "all", *(f"class {c}" for c in classes)]
    header.append(f"mean of classes {','.join(map(str, others))}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell in experiment.cells:
        for label, accuracy, per_class in class_accuracy_rows(results[cell]) if cell in results else []:
            values = [percent(accuracy), *(percent(per_class[c]) for c in classes)]
            values.append(percent(_classes_mean(per_class, others)))
            lines.append(f"| {cell.name} | {label} | " + " | ".join(values) + " |")
    if pairs:
        listed = ", ".join(map(str, classes))
        lines += [
            "",
            f"| method − baseline | grid point, seed | method: final, classes {listed} (%) | baseline (%) | "
            "difference (pts) |",
            "|---|---|---|---|---|",
        ]
        lines += _paired_class_rows(experiment, results, classes, pairs)
    return "\n".join(lines)


def _final_classes_mean(result: CellResult, classes: Sequence[int]) -> float | None:
    rows = class_accuracy_rows(result)
    return _classes_mean(rows[-1][2], classes) if rows else None


def _paired_class_rows(
    experiment: Experiment, results: Mapping[Cell, CellResult], classes: Sequence[int], pairs: Mapping[str, str]
) -> list[str]:
    by_key = {(c.point, c.method, c.seed): results[c] for c in experiment.cells if c in results}
    lines: list[str] = []
    for method, baseline in pairs.items():
        for point in dict.fromkeys(c.point for c in experiment.cells):
            differences = []
            for seed in experiment.seeds:
                if (point, method, seed) not in by_key or (point, baseline, seed) not in by_key:
                    continue
                ours = _final_classes_mean(by_key[(point, method, seed)], classes)
                theirs = _final_classes_mean(by_key[(point, baseline, seed)], classes)
                if ours is None or theirs is None:
                    continue
                differences.append(100 * (ours - theirs))
                where = ", ".join(filter(None, [point_label(point), f"seed {seed}"]))
                lines.append(
                    f"| {method} − {baseline} | {where} | {100 * ours:.1f} | {100 * theirs:.1f} | "
                    f"{differences[-1]:+.1f} |"
                )
            if len(differences) > 1:
                mean, std = statistics.mean(differences), statistics.stdev(differences)
                ahead = f"{sum(d > 0 for d in differences)}/{len(differences)} ahead"
                where = ", ".join(filter(None, [point_label(point), "mean"]))
                lines.append(f"| {method} − {baseline} | {where} | | | {mean:+.1f} ± {std:.1f} ({ahead}) |")
    return lines
