"""KAFAL's cycles.jsonl (``methods/kafal/results.py``) through the framework's recorder: a cycle's row, its summary,
its plot, and the collapse check starting afresh after a cycle that restarts the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from methods.kafal.plot import CYCLES_PLOT_FILE
from methods.kafal.results import CYCLES
from server_app.results import RunRecorder, run_directory
from tests.conftest import make_config


def stats(pid: int, n: int, seconds: float) -> dict:
    return {"partition_id": pid, "num_examples": n, "num_local": 2 * n, "train_seconds": seconds}


def cycles_recorder(tmp_path: Path) -> RunRecorder:
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config, files=(CYCLES,))
    recorder.evaluated(0, 2.3, 0.1)
    return recorder


def test_a_cycle_that_restarts_its_model_is_compared_afresh(tmp_path: Path) -> None:
    """KAFAL starts every cycle from Ω⁰ on purpose: the first rounds of a new cycle, back near chance, are no
    collapse; a fall within a cycle still is."""
    recorder = cycles_recorder(tmp_path)
    for server_round, accuracy in ((1, 0.6), (2, 0.7), (3, 0.12), (4, 0.5), (5, 0.11)):
        recorder.round_started(server_round, [0], 10)
        recorder.replies_received(server_round, [stats(0, 10, 1.0)], 9)
        if server_round == 2:
            recorder.report(CYCLES, {"cycle": 1, "rounds": [1, 2], "restarts": True})
        recorder.evaluated(server_round, 2.0, accuracy)
    warnings = {r["round"]: r.get("warning") for r in recorder.rounds}
    assert warnings[3] is None and warnings[4] is None
    assert warnings[5].startswith("at chance level")
    assert recorder.summary()["warnings"] == [f"the final model (round 5) is {warnings[5]}"]


def test_a_cycles_row_sums_its_rounds_and_query_and_is_summarised_and_plotted(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    recorder = cycles_recorder(tmp_path)
    for server_round in (1, 2):
        recorder.round_started(server_round, [0, 1], 100)
        recorder.replies_received(server_round, [stats(0, 10, 1.5), stats(1, 10, 2)], 90)
        if server_round == 2:
            fields = {"cycle": 0, "rounds": [1, 2], "trained_labelled_fraction": 0.1, "labelled_fraction": 0.2}
            recorder.report(CYCLES, {**fields, "query_seconds": 3.0, "query_bytes_down": 7, "query_bytes_up": 5})
        recorder.evaluated(server_round, 1.5, {1: 0.5, 2: 0.6}[server_round])
    summary = recorder.finish({"w": torch.ones(1)})
    (row,) = [json.loads(line) for line in (tmp_path / "r" / "cycles.jsonl").read_text().splitlines()]
    assert row["cycle"] == 0 and row["accuracy"] == 0.6 and row["loss"] == 1.5
    assert row["client_train_seconds"] == 7.0 and row["bytes_down"] == 207 and row["bytes_up"] == 185
    assert summary["cycles"] == [
        {"cycle": 0, "trained_labelled_fraction": 0.1, "labelled_fraction": 0.2, "accuracy": 0.6, "query_seconds": 3.0}
    ]
    assert (tmp_path / "r" / CYCLES_PLOT_FILE).is_file()
