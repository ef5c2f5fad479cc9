"""Central evaluation of the global model on the test set, after every round, on the server's device (the test
set moves there once and stays for the whole run)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from flwr.app import ArrayRecord

from data.federated import load_test_set
from data.transforms import to_model_input
from models.training import evaluate
from run_config import RunConfig, build_model_for, federated_split
from strategies.partial_model import merge_state


class CentralEvaluation:
    """Test loss and accuracy of the global model {φ, θ} for a round's θ."""

    def __init__(self, config: RunConfig, frozen: Mapping[str, torch.Tensor], device: torch.device) -> None:
        split = federated_split(config)
        test = load_test_set(split)
        self.inputs = to_model_input(test.images, split.info).to(device)
        self.labels = torch.from_numpy(test.labels).to(device)
        self.model = build_model_for(config).to(device)
        self.order = list(self.model.state_dict())
        self.frozen, self.batch_size = frozen, config.eval_batch_size

    def __call__(self, theta: ArrayRecord) -> tuple[float, float]:
        return self.of_state(merge_state(self.frozen, theta.to_torch_state_dict(), self.order))

    def of_state(self, state: Mapping[str, torch.Tensor]) -> tuple[float, float]:
        """Test loss and accuracy of a whole model's state (a method's own model, e.g. FedSplit's composed one)."""
        self.model.load_state_dict(state)
        self.model.eval()
        return evaluate(self.model, self.inputs, self.labels, self.batch_size)
