"""Central evaluation from the test set's cached frozen features gives what the whole model gives, bit for bit."""

from __future__ import annotations

import pytest
import torch
from flwr.app import ArrayRecord

import server_app.central_evaluation as central
from run_config import build_model_for, parse_run_config
from run_config.defaults import load_defaults
from strategies.partial_model import split_state


@pytest.mark.parametrize("model, level", [("wrn-10-1", "mid"), ("lenet5", "low")])
def test_cached_features_give_the_whole_models_loss_and_accuracy(model: str, level: str, monkeypatch) -> None:
    config = parse_run_config(
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
