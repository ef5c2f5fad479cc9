"""Central evaluation of the global model on the test set, after every round, on the server's device (the test
set moves there once and stays for the whole run)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from flwr.app import ArrayRecord, MetricRecord

from data.federated import load_test_set
from data.transforms import to_model_input
from models.training import evaluate
from run_config import RunConfig, build_model_for, federated_split
from strategies.partial_model import merge_state

EvaluateFn = Callable[[int, ArrayRecord], MetricRecord]
#: (server round, loss, accuracy) -> None
OnEvaluated = Callable[[int, float, float], None]


def make_central_evaluation(
    config: RunConfig, frozen: Mapping[str, torch.Tensor], on_evaluated: OnEvaluated, device: torch.device
) -> EvaluateFn:
    """An ``evaluate_fn`` for ``Strategy.start``: merges φ with the round's θ, returns test loss and accuracy."""
    split = federated_split(config)
    test = load_test_set(split)
    inputs = to_model_input(test.images, split.info).to(device)
    labels = torch.from_numpy(test.labels).to(device)
    model = build_model_for(config).to(device)
    order = list(model.state_dict())

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model.load_state_dict(merge_state(frozen, arrays.to_torch_state_dict(), order))
        model.eval()
        loss, accuracy = evaluate(model, inputs, labels, config.eval_batch_size)
        on_evaluated(server_round, loss, accuracy)
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    return evaluate_fn
