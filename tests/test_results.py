"""The results contract: config.json, rounds.jsonl, summary.json, model.pt."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from server_app.results import RunRecorder, learning_efficiency, readable_summary, run_directory
from tests.conftest import make_config


def stats(pid: int, n: int, seconds: float) -> dict:
    return {"partition_id": pid, "num_examples": n, "num_local": 2 * n, "train_seconds": seconds}


def test_recorder_writes_every_contract_field(tmp_path: Path) -> None:
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 2.3, 0.1)
    recorder.round_started(1, [2, 0], 1000)
    recorder.replies_received(1, [stats(0, 10, 1.5), stats(2, 30, 2.5)], 900)
    recorder.evaluated(1, 1.0, 0.6)
    recorder.round_started(2, [1], 500)
    recorder.replies_received(2, [stats(1, 20, 4.0)], 450)
    recorder.evaluated(2, 1.2, 0.5)
    summary = recorder.finish({"w": torch.ones(2)})

    run = tmp_path / "r"
    assert json.loads((run / "config.json").read_text())["results-dir"] == str(tmp_path)
    first, second = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    assert first["round"] == 1 and first["accuracy"] == 0.6 and first["loss"] == 1.0
    assert first["clients"] == [2, 0]
    assert [s["partition_id"] for s in first["client_stats"]] == [2, 0]  # selection order
    assert first["num_examples"] == 40 and first["client_train_seconds"] == 4.0
    assert first["bytes_down"] == 1000 and first["bytes_up"] == 900 and first["wall_seconds"] >= 0
    assert second["clients"] == [1]
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk == summary
    assert on_disk["best_accuracy"] == 0.6 and on_disk["best_round"] == 1 and on_disk["final_accuracy"] == 0.5
    assert on_disk["total_client_train_seconds"] == 8.0
    assert on_disk["learning_efficiency"] == pytest.approx(100 * 0.6 / 8.0)
    assert on_disk["initial_accuracy"] == 0.1 and on_disk["rounds"] == 2 and on_disk["method"] == "fedft-eds"
    assert torch.equal(torch.load(run / "model.pt")["w"], torch.ones(2))


def test_the_summary_says_what_the_server_computed_on(tmp_path: Path) -> None:
    """Trained models differ between CPU generations and thread counts: the summary and the log's last lines name
    them, so that a figure that differs from the docs can be traced to its machine."""
    config = make_config(results_dir=str(tmp_path), run_name="r")
    machine = {"device": "cpu", "cpu": "AMD EPYC (family 26, model 2)", "cpu_capability": "AVX512"}
    recorder = RunRecorder(run_directory(config), config, machine={**machine, "torch": "2.13.0+cpu", "threads": 2})
    recorder.evaluated(0, 2.3, 0.1)
    recorder.round_started(1, [0], 10)
    recorder.replies_received(1, [stats(0, 10, 1.5)], 9)
    recorder.evaluated(1, 1.0, 0.6)
    summary = recorder.finish({"w": torch.ones(2)})
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["machine"]["cpu"] == machine["cpu"]
    assert readable_summary(summary)[-1] == (
        "server computed on cpu: AMD EPYC (family 26, model 2), torch 2.13.0+cpu, CPU kernels AVX512, 2 threads"
    )
    assert "machine" not in RunRecorder(tmp_path / "other", config).summary()  # only what is known


def test_learning_efficiency_without_training_time_is_nan() -> None:
    assert learning_efficiency(0.5, 0.0) != learning_efficiency(0.5, 0.0)


def test_empty_run_name_is_generated(tmp_path: Path) -> None:
    from datetime import datetime

    config = make_config(results_dir=str(tmp_path), run_name="")
    path = run_directory(config, now=datetime(2026, 1, 2, 3, 4, 5))
    assert path == tmp_path / "fedft-eds-fashion-mnist-mini-20260102-030405"


def test_further_accuracies_a_method_records_get_their_best_in_the_summary(tmp_path: Path) -> None:
    config = make_config(results_dir=str(tmp_path), run_name="r", method="fedfsc")
    recorder = RunRecorder(run_directory(config), config)
    for server_round, (accuracy, base) in enumerate([(0.5, 0.6), (0.7, 0.55), (0.65, 0.58)], start=1):
        recorder.round_started(server_round, [0], 10)
        recorder.replies_received(server_round, [stats(0, 10, 1.0)], 10)
        recorder.evaluated(server_round, 1.0, accuracy, base_accuracy=base, base_loss=2.0)
    summary = recorder.finish({"w": torch.ones(2)})
    rounds = [json.loads(line) for line in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()]
    assert [r["base_accuracy"] for r in rounds] == [0.6, 0.55, 0.58] and rounds[0]["base_loss"] == 2.0
    assert summary["best_accuracy"] == 0.7 and summary["best_base_accuracy"] == 0.6
    assert "best_base_loss" not in summary


def test_a_stop_waits_for_the_round_being_recorded_and_the_run_records_nothing_after_it(tmp_path: Path) -> None:
    """In Flower's simulation engine a stopped run's exit handler runs in another thread than the ServerApp's: the
    summary it writes holds the round being recorded and checkpointed at that moment, and the run's own end then
    changes nothing."""
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 2.3, 0.1)
    recorder.round_started(1, [0], 100)
    recorder.replies_received(1, [stats(0, 10, 1.5)], 90)
    stop = threading.Thread(target=recorder.stopped, args=("interrupted",))
    with recorder.writing:  # the ServerApp thread records and checkpoints round 1 while the stop arrives
        stop.start()
        stop.join(0.3)
        assert stop.is_alive() and not (tmp_path / "r" / "summary.json").exists()
        recorder.evaluated(1, 1.0, 0.6)
        recorder.checkpointed(recorder.state())
    stop.join(5)
    assert not stop.is_alive()

    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 1 and summary["final_accuracy"] == 0.6
    assert recorder.finish({"w": torch.ones(2)}) == summary  # the ServerApp reaching its end afterwards
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == summary
    assert not (tmp_path / "r" / "model.pt").exists()  # the checkpoint holds the model of the last round recorded


def test_a_stop_between_a_rounds_record_and_its_checkpoint_keeps_the_checkpointed_rounds(tmp_path: Path) -> None:
    """A stop that lands in the ServerApp's own thread (Ctrl-C in process, SIGTERM to a deployed ServerApp) after
    round 2 was recorded but before its checkpoint was saved: the results go back to round 1, as the checkpoint."""
    config = make_config(results_dir=str(tmp_path), run_name="r")
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 2.3, 0.1)
    for server_round, accuracy in ((1, 0.5), (2, 0.7)):
        recorder.round_started(server_round, [0], 100)
        recorder.replies_received(server_round, [stats(0, 10, 1.5)], 90)
        recorder.evaluated(server_round, 1.0, accuracy)
        if server_round == 1:
            recorder.checkpointed(recorder.state())
    summary = recorder.stopped("interrupted")
    assert summary is not None and summary["rounds"] == 1 and summary["best_accuracy"] == 0.5
    assert [json.loads(line)["round"] for line in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()] == [1]
    assert summary["initial_accuracy"] == 0.1
    assert recorder.stopped("interrupted") is None  # once only


def test_a_collapse_is_in_the_round_record_the_log_and_the_summary(tmp_path: Path, caplog) -> None:
    """FedMD once fell from 80.8% to 10.0% and the run said only 'run completed': now the round, the summary and
    the log's last lines say it."""
    config = make_config(results_dir=str(tmp_path), run_name="r", dataset="fashion-mnist-mini")
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 0.5, 0.808)
    for server_round, accuracy in ((1, 0.4), (2, 0.1)):
        recorder.round_started(server_round, [0], 10)
        recorder.replies_received(server_round, [stats(0, 10, 1.0)], 9)
        recorder.evaluated(server_round, 2.3, accuracy)
    with caplog.at_level("INFO", logger="flwr"):
        summary = recorder.finish({"w": torch.ones(2)})
    rounds = [json.loads(line) for line in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()]
    assert rounds[0]["warning"] == "40.8 points below the start (80.8%)"
    assert rounds[1]["warning"].startswith("at chance level")
    assert summary["warnings"] == [
        "the final model (round 2) is at chance level (≤ 15% for 10 classes) after being above it"
    ]
    assert any(r.levelname == "WARNING" and "warning: the final model" in r.getMessage() for r in caplog.records)


def test_a_chosen_cohort_and_its_label_entropy_are_in_the_round_line(tmp_path: Path, caplog) -> None:
    config = make_config(
        results_dir=str(tmp_path), run_name="r", client_selection="fedentopt", fraction_train=0.3, fedentopt_buffer=0.2
    )
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 2.3, 0.1)
    recorder.round_started(1, [4, 1, 7], 10, cohort_label_entropy=3.1)
    recorder.replies_received(1, [stats(4, 10, 1.0)], 9)
    with caplog.at_level("INFO", logger="flwr"):
        recorder.evaluated(1, 1.0, 0.6)
    assert "; cohort [4, 1, 7]: label entropy 3.10 of 3.32 bits" in caplog.records[-1].getMessage()


def test_learning_efficiency_is_shown_with_what_it_divides_only_when_training_gained(tmp_path: Path) -> None:
    base = {
        "status": "completed",
        "rounds_aggregated": 2,
        "rounds": 2,
        "rounds_skipped": 0,
        "best_round": 2,
        "final_accuracy": 0.6,
        "total_client_train_seconds": 8.0,
    }
    gained = readable_summary({**base, "initial_accuracy": 0.1, "best_accuracy": 0.6, "learning_efficiency": 7.5})
    assert gained[2] == (
        "client training time 8.0 s; learning efficiency 7.500 %/s (best accuracy ÷ client training seconds, "
        "the FedFT-EDS paper's §IV-D measure for comparing methods on one machine)"
    )
    fell = readable_summary({**base, "initial_accuracy": 0.8, "best_accuracy": 0.6, "learning_efficiency": 7.5})
    assert fell[2] == "client training time 8.0 s"
