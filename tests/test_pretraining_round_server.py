"""The pretraining round (server_app/pretraining_round.py; thesis §6.4.1 step 2) in whole runs of the real apps in one
process: what it records, that FL and φ start from its output, its aggregation, refusals, failures, cache and resume,
and its settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord

from methods.registry import CATALOGUE
from models.fingerprint import state_fingerprint
from protocol.messages import ARRAYS, EPOCHS, TRAIN
from run_config import ConfigError, parse_run_config
from run_config.defaults import load_defaults
from server_app.checkpoint import CHECKPOINT_FILE, load_checkpoint
from server_app.pretraining_round import RoundReport, round_strategy
from server_app.results import learning_efficiency
from server_app.run_errors import RunFailedError
from strategies.client_population import ClientPopulation
from strategies.label_counts import LabelCountRegistry
from tests.fake_grid import FakeGrid, client_responders, train_metrics, train_reply
from tests.in_process import ServerKilled, run_in_process, small_run_config
from tests.learning import assert_learns, run_method


def phase_config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """The small FedFT-EDS run with its pretraining round (the method's preset), at most 3 epochs a client."""
    return small_run_config(tmp_path, **{"pretrain-round": "auto", "pretrain-round-max-epochs": 3, **overrides})


def records(tmp_path: Path, run_name: str = "run") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "results" / run_name / "rounds.jsonl").read_text().splitlines()]


def summary(tmp_path: Path, run_name: str = "run") -> dict[str, Any]:
    return json.loads((tmp_path / "results" / run_name / "summary.json").read_text())


@pytest.fixture(scope="module")
def fedft_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    tmp_path = tmp_path_factory.mktemp("phase")
    grid = run_in_process(phase_config(tmp_path))
    return tmp_path, grid


def test_the_round_is_rounds_jsonl_round_0_and_the_summary_names_it(fedft_run):
    tmp_path, _ = fedft_run
    phase, *rounds = records(tmp_path)
    assert phase["round"] == 0 and phase["phase"] == "pretraining-round" and phase["cached"] is False
    assert [r["round"] for r in rounds] == [1, 2, 3] and all("phase" not in r for r in rounds)
    assert phase["clients"] == [0, 1, 2, 3] and sorted(phase["epochs"]) == ["0", "1", "2", "3"]
    assert all(1 <= e <= 3 for e in phase["epochs"].values())
    assert [s["epochs"] for s in phase["client_stats"]] == [phase["epochs"][str(p)] for p in phase["clients"]]
    assert phase["client_train_seconds"] == pytest.approx(sum(s["train_seconds"] for s in phase["client_stats"]))
    assert phase["bytes_down"] > 0 and phase["bytes_up"] > 0
    result = summary(tmp_path)
    assert result["initial_accuracy"] == phase["accuracy"]  # FL starts from the round's output
    stated = result["pretraining_round"]
    assert stated["pretrained_accuracy"] == phase["pretrained_accuracy"]
    assert stated["client_train_seconds"] == phase["client_train_seconds"] and stated["clients"] == 4
    with_phase = result["total_client_train_seconds"] + phase["client_train_seconds"]
    assert result["total_client_train_seconds_with_pretraining_round"] == pytest.approx(with_phase)
    assert result["learning_efficiency_with_pretraining_round"] == pytest.approx(
        learning_efficiency(result["best_accuracy"], with_phase)
    )
    assert result["learning_efficiency_with_pretraining_round"] < result["learning_efficiency"]


def test_every_client_trains_the_whole_model_once_then_phi_is_frozen_from_its_output(fedft_run):
    """The round sends every client the whole model (no φ yet); the federated rounds then send φ: the round's output's
    lower part, which stays the final model's, bit for bit, and differs from the server's pretrained weights."""
    tmp_path, grid = fedft_run
    phase_messages = [
        m for m in grid.sent if m.metadata.message_type == TRAIN and m.content["config"]["server-round"] == 0
    ]
    assert len(phase_messages) == 4 and all("frozen" not in m.content.array_records for m in phase_messages)
    sent_whole = phase_messages[0].content.array_records[ARRAYS].to_torch_state_dict()
    round_1 = [m for m in grid.sent if m.metadata.message_type == TRAIN and m.content["config"]["server-round"] == 1]
    phi = round_1[0].content.array_records["frozen"].to_torch_state_dict()
    output = load_checkpoint_model(tmp_path)
    final = torch.load(tmp_path / "results" / "run" / "model.pt")
    assert set(phi) < set(sent_whole)
    for key in phi:
        assert torch.equal(phi[key], final[key]) and torch.equal(phi[key], output[key])
    assert any(not torch.equal(phi[k], sent_whole[k]) for k in phi if k.endswith("weight"))
    assert summary(tmp_path)["start_fingerprint"] == state_fingerprint(output)  # the summary names the start
    assert state_fingerprint(output) != state_fingerprint(sent_whole)


def load_checkpoint_model(tmp_path: Path) -> dict[str, torch.Tensor]:
    """The round's output, as its cache holds it."""
    [cached] = (tmp_path / "pretrained").glob("*-pretraining-round-*.pt")
    return torch.load(cached)


def test_fedavg_starts_from_the_same_cached_output(fedft_run):
    """One start for every compared method: FedAvg of the same setting reads the round's output from the cache."""
    tmp_path, _ = fedft_run
    grid = run_in_process(phase_config(tmp_path, method="fedavg", **{"run-name": "fedavg"}))
    phase = records(tmp_path, "fedavg")[0]
    assert phase["cached"] is True
    assert all(m.content["config"]["server-round"] >= 1 for m in grid.sent if m.metadata.message_type == TRAIN)
    first = records(tmp_path)[0]
    assert {k: v for k, v in phase.items() if k != "cached"} == {k: v for k, v in first.items() if k != "cached"}
    assert summary(tmp_path, "fedavg")["initial_accuracy"] == summary(tmp_path)["initial_accuracy"]
    assert summary(tmp_path, "fedavg")["start_fingerprint"] == summary(tmp_path)["start_fingerprint"]


NODES = {11: 0, 22: 1, 33: 2}
SIZES = {0: 100, 1: 300, 2: 600}


def aggregate(epochs: list[int]) -> tuple[dict[str, torch.Tensor], RoundReport]:
    """Three clients holding 100, 300 and 600 samples reply with every array of the model at 1, 2 and 3, having run
    ``epochs``, to the run's round strategy (the cap: 5 epochs)."""
    report = RoundReport()
    config = _parsed(**{"pretrain-round-max-epochs": 5})
    strategy = round_strategy(config, ClientPopulation(wait_seconds=0), LabelCountRegistry(2, noisy=False), report)
    grid = FakeGrid(NODES, client_responders(NODES, {pid: [size, 0] for pid, size in SIZES.items()}))
    start = {"w": torch.zeros(2, 3), "b": torch.zeros(3)}
    messages = list(strategy.configure_train(1, ArrayRecord(start), ConfigRecord(), grid))
    replies = []
    for message, value, ran in zip(messages, (1.0, 2.0, 3.0), epochs, strict=True):
        pid = NODES[message.metadata.dst_node_id]
        metrics = {**train_metrics(pid, SIZES[pid], SIZES[pid]), EPOCHS: ran}
        replies.append(train_reply(message, {k: torch.full_like(v, value) for k, v in start.items()}, metrics))
    arrays, _ = strategy.aggregate_train(1, replies)
    return arrays.to_torch_state_dict(), report


def test_the_round_averages_whole_models_by_sample_count():
    mean, report = aggregate([2, 5, 1])
    for value in mean.values():
        assert torch.allclose(value, torch.full_like(value, (100 * 1 + 300 * 2 + 600 * 3) / 1000))
    assert report.record["epochs"] == {"0": 2, "1": 5, "2": 1} and report.record["rejected"] == []


def test_a_reply_claiming_more_epochs_than_the_cap_is_refused_and_named():
    mean, report = aggregate([2, 6, 1])
    [refused] = report.record["rejected"]
    assert refused["partition_id"] == 1 and "'epochs' = 6 is above the round's max-epochs = 5" in refused["reason"]
    for value in mean.values():
        assert torch.allclose(value, torch.full_like(value, (100 * 1 + 600 * 3) / 700))


def test_a_failing_client_is_named_and_the_others_aggregated(tmp_path: Path):
    run_in_process(phase_config(tmp_path, **{"fail-partitions": "2:raise", "num-server-rounds": 1}))
    phase = records(tmp_path)[0]
    assert [f["partition_id"] for f in phase["failed"]] == [2] and phase["clients"] == [0, 1, 2, 3]
    assert sorted(phase["epochs"]) == ["0", "1", "3"]
    assert summary(tmp_path)["pretraining_round"]["failed"] == 1


def test_a_round_without_any_update_fails_the_run_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    config = phase_config(tmp_path, **{"fail-partitions": "0:raise,1:raise,2:raise,3:raise"})
    with pytest.raises(RunFailedError, match=r"^the pretraining round got no update \(client 0 failed: "):
        run_in_process(config)
    result = summary(tmp_path)
    assert result["status"] == "failed" and result["failure"].startswith("the pretraining round got no update")


def test_a_run_killed_after_the_round_resumes_after_it(tmp_path: Path):
    """Killed when round 1's training starts: the checkpoint holds the round's output (round 0); the resumed run sends
    no pretraining-round message, and ends as an uninterrupted run."""
    with pytest.raises(ServerKilled):
        run_in_process(phase_config(tmp_path, **{"pretrain-cache-dir": str(tmp_path / "cache-a")}), kill_at_round=1)
    assert load_checkpoint(tmp_path / "results" / "run" / CHECKPOINT_FILE).server_round == 0
    # a cache emptied meanwhile: the resumed run must not need it
    resumed = phase_config(tmp_path, resume=True, **{"pretrain-cache-dir": str(tmp_path / "cache-a")})
    for path in (tmp_path / "cache-a").glob("*-pretraining-round-*"):
        path.unlink()
    grid = run_in_process(resumed)
    assert all(m.content["config"]["server-round"] >= 1 for m in grid.sent if m.metadata.message_type == TRAIN)
    run_in_process(phase_config(tmp_path, **{"run-name": "whole", "pretrain-cache-dir": str(tmp_path / "cache-b")}))
    killed, whole = records(tmp_path), records(tmp_path, "whole")
    assert [r["round"] for r in killed] == [0, 1, 2, 3]
    assert [r["accuracy"] for r in killed] == [r["accuracy"] for r in whole]
    assert summary(tmp_path)["pretraining_round"]["epochs"] == summary(tmp_path, "whole")["pretraining_round"]["epochs"]


def _parsed(**values: Any):
    return parse_run_config({**load_defaults(), **values}, CATALOGUE)


def test_the_round_is_the_fedft_family_and_its_baselines_default_when_pretraining_is_on():
    for method in ("fedft-eds", "fedft-rds", "fedft-all", "fedavg", "fedavg-rds", "fedprox", "fedprox-rds"):
        assert _parsed(method=method).pretrain_round is True, method
        assert _parsed(method=method, pretrain="none").pretrain_round is False, method  # FedAvg w/o pretraining
    for method in ("moon", "scaffold", "fedfsc", "kafal"):
        assert _parsed(method=method).pretrain_round is False, method
    assert _parsed(method="fedft-eds", **{"pretrain-round": False}).pretrain_round is False  # today's start
    assert _parsed(pretrain="none", **{"pretrain-round": True}).pretrain_round is True  # thesis Table 6.5's other row


@pytest.mark.parametrize(
    ("key", "value"),
    [("pretrain-round-tolerance", 0.0), ("pretrain-round-tolerance", -0.1), ("pretrain-round-max-epochs", 0)],
)
def test_a_bad_rule_is_refused_naming_its_key(key, value):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        _parsed(**{key: value})


def test_fedft_eds_learns_from_the_two_step_start(tmp_path, pretrained):
    """The learns-task (tests/learning.py) with FedFT-EDS's default start: the server's MNIST pretraining, then the
    pretraining round; FL must end above the round's output and well above chance. Seeds 0/1/2 (measured with
    3 local epochs): after the server's pretraining 8.9 / 10.0 / 4.1%, after the round 63.5 / 52.5 / 61.5%, final
    73.8 / 72.5 / 81.1% (from the server's pretraining alone: 60.1 / 52.3 / 48.6%)."""
    outcome = run_method(tmp_path, pretrained, method="fedft-eds", **{"pretrain-round": "auto", "local-epochs": 3})
    assert outcome.summary["pretraining_round"] is not None
    assert_learns(outcome, at_least=0.6)
