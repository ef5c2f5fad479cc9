"""A method's own result file (``server_app/result_files.py``): rows its server step reports are completed with the
round's evaluation, written to ``<name>.jsonl``, kept in checkpoints and restored on resume, summarised and plotted,
with nothing in the framework naming the file."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from flwr.app import ArrayRecord, Message, MetricRecord

import server_app.app as server
from methods.base import Method, MethodContractError
from methods.registry import METHODS
from server_app.lifecycle import FederatedRun
from server_app.result_files import ResultFile, Row
from server_app.results import RunRecorder, run_directory
from strategies.cohort_fedavg import CohortFedAvg
from strategies.partial_fedavg import PartialModelFedAvg
from tests.conftest import make_config
from tests.in_process import ServerKilled, run_in_process, small_run_config


def toy_row(fields: Row, record: Row, rounds: Sequence[Row]) -> Row:
    """The reported fields with the evaluated round's accuracy."""
    return {**fields, "accuracy": record["accuracy"]}


def toy_summary(rows: Sequence[Row]) -> Row:
    return {"toy_rows": len(rows)}


def toy_plot(directory: Path, rows: Sequence[Row], title: str) -> Path:
    path = directory / "toy.txt"
    path.write_text(f"{title}: {len(rows)} rows\n")
    return path


TOY = ResultFile("toy", row=toy_row, summary=toy_summary, plot=toy_plot)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def record_round(recorder: RunRecorder, server_round: int, accuracy: float, report: bool = True) -> None:
    recorder.round_started(server_round, [0], 10)
    recorder.replies_received(server_round, [{"partition_id": 0, "num_examples": 5, "train_seconds": 1.0}], 9)
    if report:
        recorder.report(TOY, {"round": server_round})
    recorder.evaluated(server_round, 1.0, accuracy)


def test_a_reported_row_is_written_with_its_rounds_evaluation_kept_and_restored(tmp_path: Path) -> None:
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config, files=(TOY,))
    recorder.evaluated(0, 2.0, 0.1)
    record_round(recorder, 1, 0.5)
    record_round(recorder, 2, 0.6, report=False)
    state = recorder.state()
    recorder.checkpointed(state)
    record_round(recorder, 3, 0.7)
    file = tmp_path / "r" / "toy.jsonl"
    assert read_rows(file) == [{"round": 1, "accuracy": 0.5}, {"round": 3, "accuracy": 0.7}]
    assert state["files"] == {"toy": [{"round": 1, "accuracy": 0.5}]}

    recorder.stopped("interrupted")  # back to the checkpoint's rows
    assert read_rows(file) == [{"round": 1, "accuracy": 0.5}]
    resumed = RunRecorder(run_directory(config), config, resume_from=state, files=(TOY,))
    record_round(resumed, 3, 0.8)
    summary = resumed.finish({"w": torch.ones(1)})
    assert read_rows(file) == [{"round": 1, "accuracy": 0.5}, {"round": 3, "accuracy": 0.8}]
    assert summary["toy_rows"] == 2
    assert (tmp_path / "r" / "toy.txt").read_text().endswith(": 2 rows\n")


def test_a_run_without_rows_writes_no_file_nor_summary_field(tmp_path: Path) -> None:
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config, files=(TOY,))
    record_round(recorder, 1, 0.5, report=False)
    assert "toy_rows" not in recorder.finish({"w": torch.ones(1)})
    assert not (tmp_path / "r" / "toy.jsonl").exists() and not (tmp_path / "r" / "toy.txt").exists()


def test_a_file_the_method_did_not_declare_or_a_bad_name_is_refused(tmp_path: Path) -> None:
    config = make_config(results_dir=str(tmp_path), run_name="r")
    with pytest.raises(ValueError, match="'toy' is not one of the run's method's"):
        RunRecorder(run_directory(config), config).report(TOY, {})
    with pytest.raises(ValueError, match="not 'rounds'"):
        ResultFile("rounds")
    with pytest.raises(ValueError, match="result file name '../x'"):
        ResultFile("../x")
    with pytest.raises(MethodContractError, match="result file 'toy.jsonl' is not a server_app.result_files"):
        Method("m", "a method", result_files=("toy.jsonl",))  # type: ignore[arg-type]


class ToyFedAvg(PartialModelFedAvg):
    """The shared strategy, reporting a row of toy.jsonl for every round it aggregates."""

    def __init__(self, *, recorder: RunRecorder, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recorder = recorder

    def aggregate_round(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        arrays, metrics = super().aggregate_round(server_round, replies)
        self.recorder.report(TOY, {"round": server_round, "replies": len(replies)})
        return arrays, metrics


def toy_strategy(run: FederatedRun) -> CohortFedAvg:
    return ToyFedAvg(recorder=run.recorder, **run.strategy_arguments())


def test_a_toy_methods_file_is_written_and_restored_on_resume_without_the_framework_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A method declared outside the framework (FedAvg with a result file) runs, is killed after round 2's
    checkpoint and resumes: its file holds each round once, restored from the checkpoint."""
    toy = dataclasses.replace(METHODS["fedavg"], strategy=toy_strategy, result_files=(TOY,))
    monkeypatch.setattr(server, "METHODS", {**METHODS, "fedavg": toy})
    config = small_run_config(tmp_path, method="fedavg", pretrain="none", **{"num-server-rounds": 4})
    with pytest.raises(ServerKilled):
        run_in_process(config, kill_at_round=3)
    run = tmp_path / "results" / "run"
    assert [row["round"] for row in read_rows(run / "toy.jsonl")] == [1, 2]
    run_in_process({**config, "resume": True})
    rows = read_rows(run / "toy.jsonl")
    rounds = read_rows(run / "rounds.jsonl")
    assert [row["round"] for row in rows] == [1, 2, 3, 4] and all(row["replies"] == 4 for row in rows)
    assert [row["accuracy"] for row in rows] == [r["accuracy"] for r in rounds]
    assert json.loads((run / "summary.json").read_text())["toy_rows"] == 4
    assert (run / "toy.txt").is_file()
