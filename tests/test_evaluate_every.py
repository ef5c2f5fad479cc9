"""``evaluate-every``: the global model is scored centrally every k rounds and in the last; skipping a scoring changes
nothing else of the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strategies.central_evaluation import evaluates
from tests.in_process import run_in_process, small_run_config


@pytest.mark.parametrize(
    ("server_round", "expected"),
    [(0, True), (1, False), (2, False), (3, True), (6, True), (7, False), (8, True)],
)
def test_the_start_every_kth_and_the_last_round_are_scored(server_round, expected):
    assert evaluates(server_round, every=3, last_round=8) is expected


def test_every_round_is_scored_by_default():
    assert all(evaluates(r, every=1, last_round=5) for r in range(6))


def run(tmp_path: Path, name: str, every: int) -> tuple[list[dict], dict, Path]:
    config = small_run_config(
        tmp_path, **{"method": "fedavg", "pretrain": "none", "num-server-rounds": 5, "evaluate-every": every}
    )
    config["run-name"] = name
    run_in_process(config, 4)
    folder = Path(config["results-dir"]) / name
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return rounds, json.loads((folder / "summary.json").read_text()), folder


def test_skipped_scorings_leave_the_run_unchanged_and_the_summary_reads_the_scored_rounds(tmp_path):
    every, every_summary, _ = run(tmp_path, "every", 1)
    second, second_summary, folder = run(tmp_path, "second", 2)
    assert [r["round"] for r in second] == [1, 2, 3, 4, 5]
    assert [r["accuracy"] is None for r in second] == [True, False, True, False, False]
    assert [r["class_accuracy"] is None for r in second] == [True, False, True, False, False]
    for scored, reference in zip(second, every, strict=True):  # the same training, whatever is scored
        assert scored["clients"] == reference["clients"] and scored["num_examples"] == reference["num_examples"]
        if scored["accuracy"] is not None:
            assert scored["accuracy"] == reference["accuracy"] and scored["loss"] == reference["loss"]
    scored = {r["round"]: r["accuracy"] for r in every if r["round"] in (2, 4, 5)}
    assert second_summary["best_accuracy"] == max(scored.values())
    assert second_summary["final_accuracy"] == every_summary["final_accuracy"] == scored[5]
    assert second_summary["initial_accuracy"] == every_summary["initial_accuracy"]
    assert second_summary["rounds"] == 5
    assert (folder / "accuracy.png").exists()
