"""experiments/fedat_table5_8_view.py: Table 5.8's rows from a cell's files."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.fedat_table5_8_view import rows


def test_rows_give_the_absent_classes_and_the_generic_mean_of_initial_best_and_final(tmp_path: Path) -> None:
    per_class = [[0.1 * c for c in range(10)], [0.5] * 10, [1.0, 0, 0, 0, 0, 0.25, 0, 0, 0.75, 0]]
    (tmp_path / "summary.json").write_text(
        json.dumps({"initial_accuracy": 0.45, "initial_class_accuracy": per_class[0]})
    )
    records = [{"round": 1, "accuracy": 0.5, "class_accuracy": per_class[1]}]
    records += [{"round": 2, "accuracy": 0.2, "class_accuracy": per_class[2]}]
    (tmp_path / "rounds.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    (tmp_path / "config.json").write_text("{}")
    generic_initial = 100 * sum(0.1 * c for c in (1, 2, 3, 4, 6, 7, 9)) / 7
    assert rows(tmp_path) == [
        f"| {tmp_path.name} | initial | 45.0 | 0.0 | 50.0 | 80.0 | {generic_initial:.1f} |",
        f"| {tmp_path.name} | round 1 (best) | 50.0 | 50.0 | 50.0 | 50.0 | 50.0 |",
        f"| {tmp_path.name} | round 2 (final) | 20.0 | 100.0 | 25.0 | 75.0 | 0.0 |",
    ]
