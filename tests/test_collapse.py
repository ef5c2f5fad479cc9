"""A collapse is visible: chance level after having been above it, or far below the start."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from server_app.collapse import chance_level, diverging_losses, non_finite_refusals, round_warning, run_warnings
from server_app.results import RunRecorder, run_directory
from tests.conftest import make_config


def test_chance_level_is_one_and_a_half_times_uniform():
    assert chance_level(10) == 0.15 and chance_level(4) == 0.375


def test_a_model_that_falls_to_chance_is_flagged_one_that_never_left_it_is_not():
    assert "at chance level" in round_warning(0.10, [0.80], 10)
    assert "at chance level" in round_warning(0.10, [None, 0.40], 10)  # an unscored start, an earlier good round
    assert round_warning(0.10, [0.10], 10) is None  # from scratch: not yet learning is no collapse
    assert round_warning(0.12, [0.09, 0.11], 10) is None


def test_far_below_the_start_is_flagged_with_the_fall():
    assert round_warning(0.60, [0.80, 0.70], 10) == "20.0 points below the start (80.0%)"
    assert round_warning(0.66, [0.80], 10) is None  # 14 points: within the margin
    assert round_warning(0.50, [None, 0.80], 10) is None  # no scored start to compare with


def rounds(*pairs):
    return [{"round": r, "accuracy": a, **({"warning": w} if w else {})} for r, a, w in pairs]


def test_run_warnings_name_the_final_model_and_the_rounds_at_chance():
    at_chance = "at chance level (≤ 15% for 10 classes) after being above it"
    assert run_warnings(rounds((1, 0.1, at_chance), (2, 0.1, at_chance)), 10) == [
        f"the final model (round 2) is {at_chance}",
        "the global model was at chance level in round 1",
    ]
    assert run_warnings(rounds((1, 0.1, at_chance), (2, 0.6, None), (3, 0.1, at_chance), (4, 0.62, None)), 10) == [
        "the global model was at chance level in rounds 1, 3"
    ]
    assert run_warnings(rounds((1, 0.6, "20.0 points below the start (80.0%)")), 10) == [
        "the final model (round 1) is 20.0 points below the start (80.0%)"
    ]
    assert run_warnings(rounds((1, 0.6, None), (2, 0.7, None)), 10) == []
    assert run_warnings([], 10) == []


def test_a_model_that_never_leaves_chance_is_named_once():
    """FedMD's global model at 10.5 -> 10.0% (chance 15% for 10 classes): no round fell there, none left it."""
    assert run_warnings(rounds((1, 0.105, None), (2, 0.100, None)), 10) == [
        "the global model never left chance level (≤ 15% for 10 classes) in 2 scored rounds: it did not learn at "
        "these settings"
    ]
    assert run_warnings(rounds((1, 0.105, None), (2, 0.16, None)), 10) == []  # it left chance in round 2
    assert run_warnings(rounds((1, 0.30, None), (2, 0.40, None)), 4) == []  # 4 classes: chance is 37.5%
    assert run_warnings(rounds((1, 0.30, None)), 4) == [
        "the global model never left chance level (≤ 38% for 4 classes) in 1 scored round: it did not learn at these "
        "settings"
    ]
    unscored = [{"round": 1, "accuracy": None}, {"round": 2, "accuracy": None}]
    assert run_warnings(unscored, 10) == []  # no round scored (evaluate-every): nothing to say


def refused(pid, reason):
    return {"partition_id": pid, "reason": reason}


def test_updates_refused_as_non_finite_are_named_with_their_client_and_rounds():
    nan = "array stages.low.0.weight holds NaN or infinite values"
    records = [
        {"round": r, "accuracy": 0.5, "rejected": rejected}
        for r, rejected in [
            (4, []),
            (5, [refused(6, nan)]),
            (6, [refused(6, nan)]),
            (7, [refused(6, nan), refused(2, "array x has shape (2,), expected (3,)")]),
            (8, [refused(6, nan), refused(9, "scaffold-delta-c: array c holds NaN or infinite values")]),
        ]
    ]
    assert non_finite_refusals(records) == {6: [5, 6, 7, 8], 9: [8]}  # a wrong shape is no divergence
    assert run_warnings(records, 10) == [
        "client 6's update was refused for NaN or infinite values in rounds 5-8: its local training diverged",
        "client 9's update was refused for NaN or infinite values in round 8: its local training diverged",
    ]


def losses(*per_round):
    return [
        {"round": r, "accuracy": 0.5, "client_stats": [{"partition_id": pid, "train_loss": x} for pid, x in stats]}
        for r, stats in enumerate(per_round, start=1)
    ]


def test_a_client_whose_training_loss_runs_away_is_named():
    """SCAFFOLD's client 6 at lr 0.1 (0.45, 0.60, 1.60, 7.62, then refused): 7.62 > 10 x 0.45 and > 2 ln 10."""
    records = losses([(6, 0.45), (3, 1.06)], [(6, 0.60), (3, 0.87)], [(6, 1.60), (3, 0.91)], [(6, 7.62), (3, 0.9)])
    assert diverging_losses(records, 10) == {6: [(4, 7.62, 0.45)]}
    assert run_warnings(records, 10) == ["client 6's training loss diverged: 7.62 in round 4 (its lowest before: 0.45)"]
    # ten times a small loss, but below twice a uniform prediction's ln 10 = 2.30: a client that trains rarely and
    # meets a model moved on (FedFSC's stragglers of 100 clients: 3.1 against 0.15), no divergence
    assert diverging_losses(losses([(1, 0.15)], [(1, 3.1)]), 10) == {}
    # above 2 ln C but less than ten times its lowest: a hard client, not a diverging one
    assert diverging_losses(losses([(1, 0.5)], [(1, 4.9)]), 10) == {}
    # the first round has nothing to compare with; a non-finite loss is skipped (the reply checks refuse it)
    assert diverging_losses(losses([(1, 50.0)], [(1, float("nan"))]), 10) == {}


def test_a_refused_non_finite_update_reaches_summary_json_and_the_logs_last_lines(tmp_path: Path, caplog) -> None:
    """SCAFFOLD's documented command once ended 'completed' with ``warnings: []`` while client 6 was refused for NaN
    weights in every round from round 5: the recorder's summary and last log lines now say so."""
    config = make_config(results_dir=str(tmp_path), run_name="r", dataset="fashion-mnist-mini")
    recorder = RunRecorder(run_directory(config), config)
    recorder.evaluated(0, 2.3, 0.13)
    nan = [{"partition_id": 6, "reason": "array stages.low.0.weight holds NaN or infinite values"}]
    for server_round, loss_6, rejected in ((1, 0.45, []), (2, 7.62, []), (3, None, nan)):
        recorder.round_started(server_round, [6, 1], 10)
        trained = [(1, 0.5)] + ([(6, loss_6)] if loss_6 is not None else [])
        client_stats = [{"partition_id": p, "num_examples": 5, "train_seconds": 1, "train_loss": x} for p, x in trained]
        recorder.replies_received(server_round, client_stats, 9, rejected=rejected)
        recorder.evaluated(server_round, 1.5, 0.4)
    with caplog.at_level("INFO", logger="flwr"):
        summary = recorder.finish({"w": torch.ones(2)})
    expected = [
        "client 6's update was refused for NaN or infinite values in round 3: its local training diverged",
        "client 6's training loss diverged: 7.62 in round 2 (its lowest before: 0.45)",
    ]
    assert summary["warnings"] == expected
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["warnings"] == expected
    last_lines = [r.getMessage() for r in caplog.records[-8:]]
    assert all(any(f"warning: {w}" in line for line in last_lines) for w in expected), last_lines
