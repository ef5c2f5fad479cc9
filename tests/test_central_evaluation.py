"""Central evaluation from the test set's cached frozen features gives what the whole model gives, bit for bit; each
class's test accuracy, from the same logits, reaches every round's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from flwr.app import ArrayRecord

import strategies.central_evaluation as central
from data.federated import load_test_set
from data.transforms import to_model_input
from methods.registry import parse_config
from models.training import evaluate
from run_config import build_model_for, data_cache, federated_split
from run_config.defaults import load_defaults
from strategies.partial_model import split_state
from tests.in_process import run_in_process, small_run_config


@pytest.mark.parametrize("model, level", [("wrn-10-1", "mid"), ("lenet5", "low")])
def test_cached_features_give_the_whole_models_loss_and_accuracy(model: str, level: str, monkeypatch) -> None:
    config = parse_config(
        {**load_defaults(), "dataset": "synthetic", "model": model, "freeze": level, "eval-batch-size": 64}
    )
    state = build_model_for(config, seed=3).state_dict()
    frozen, trained = split_state(state, build_model_for(config).upper_state_keys(level))
    cached = central.CentralEvaluation(config, frozen, torch.device("cpu"))
    monkeypatch.setattr(central, "MAX_CACHED_FEATURES_BYTES", 0)
    whole = central.CentralEvaluation(config, frozen, torch.device("cpu"))
    assert cached.features is not None and whole.features is None
    for step in range(2):
        theta = {k: v + 0.01 * step for k, v in trained.items()}
        assert cached(ArrayRecord(theta)) == whole(ArrayRecord(theta))


@pytest.mark.parametrize("model, level", [("wrn-10-1", "mid"), ("lenet5", "none")])
def test_with_classes_gives_the_same_loss_and_accuracy_and_each_classs_accuracy(model: str, level: str) -> None:
    config = parse_config(
        {**load_defaults(), "dataset": "synthetic", "model": model, "freeze": level, "eval-batch-size": 64}
    )
    state = build_model_for(config, seed=3).state_dict()
    frozen, trained = split_state(state, build_model_for(config).upper_state_keys(level))
    evaluation = central.CentralEvaluation(config, frozen, torch.device("cpu"))
    loss, accuracy, per_class = evaluation.with_classes(ArrayRecord(trained))
    assert (loss, accuracy) == evaluation(ArrayRecord(trained))
    whole = build_model_for(config)
    whole.load_state_dict(state)
    whole.eval()
    split = federated_split(config)
    test = load_test_set(split, data_cache(config))
    inputs, labels = to_model_input(test.images, split.info), torch.from_numpy(test.labels)
    plain_loss, plain_accuracy = evaluate(whole, inputs, labels, 64)  # the default layout: float rounding apart
    assert loss == pytest.approx(plain_loss, rel=1e-6) and accuracy == plain_accuracy
    assert per_class == pytest.approx(_by_hand(whole, config))


def _by_hand(model: torch.nn.Module, config) -> list[float | None]:
    """Each class's accuracy of the whole model on the test set, one class at a time."""
    split = federated_split(config)
    test = load_test_set(split, data_cache(config))
    inputs, labels = to_model_input(test.images, split.info), torch.from_numpy(test.labels)
    with torch.no_grad():
        predictions = model(inputs).argmax(dim=1)
    return [
        (predictions[labels == c] == c).float().mean().item() if (labels == c).any() else None
        for c in range(split.info.num_classes)
    ]


def test_every_round_record_holds_each_classs_test_accuracy(tmp_path: Path) -> None:
    """A real run's rounds.jsonl: ``class_accuracy`` of the round's global model, by class; the summary holds the
    initial model's."""
    run_config = small_run_config(tmp_path, **{"num-server-rounds": 1})
    run_in_process(run_config)
    run = tmp_path / "results" / "run"
    (record,) = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    config = parse_config(run_config)
    model = build_model_for(config)
    model.load_state_dict(torch.load(run / "model.pt"))  # the global model after round 1
    per_class = record["class_accuracy"]
    assert len(per_class) == 4 and per_class == pytest.approx(_by_hand(model.eval(), config), abs=1e-6)
    counts = torch.bincount(torch.from_numpy(load_test_set(federated_split(config)).labels), minlength=4).tolist()
    assert sum(a * n for a, n in zip(per_class, counts, strict=True)) / sum(counts) == pytest.approx(record["accuracy"])
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["initial_class_accuracy"]) == 4
    assert summary["initial_class_accuracy"] != per_class  # round 1 trained the model
