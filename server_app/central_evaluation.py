"""Central evaluation of the global model on the test set, after every round, on the server's device (the test
set moves there once and stays for the whole run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord

from data.federated import load_test_set
from data.transforms import to_model_input
from methods.model_outputs import penultimate_features
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

    def _load(self, theta: ArrayRecord) -> None:
        self.model.load_state_dict(merge_state(self.frozen, theta.to_torch_state_dict(), self.order))
        self.model.eval()

    def __call__(self, theta: ArrayRecord) -> tuple[float, float]:
        self._load(theta)
        return evaluate(self.model, self.inputs, self.labels, self.batch_size)

    def classifier_accuracies(
        self, theta: ArrayRecord, classifiers: Sequence[tuple[torch.Tensor, torch.Tensor]]
    ) -> list[float]:
        """Test accuracy of each final Linear layer (weight, bias) on the penultimate features of the model {φ, θ}:
        FedFSC's few-shot classifiers on the extractor they were trained on, one forward pass for all of them."""
        if not classifiers:
            return []
        self._load(theta)
        features = penultimate_features(self.model, self.inputs, self.batch_size)
        device = features.device
        correct = [
            (F.linear(features, w.to(device), b.to(device)).argmax(dim=1) == self.labels).float().mean()
            for w, b in classifiers
        ]
        return torch.stack(correct).tolist()
