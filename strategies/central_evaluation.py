"""Central evaluation of the global model on the test set, after every round, on the server's device (the test
set moves there once and stays for the whole run).

φ never changes during a run, so with a frozen part the test set's φ(x) is computed once, in batches of
``eval-batch-size`` exactly as the full model would compute it, and each round runs only θ on it: the same logits,
bit for bit, at the cost of θ alone (a quarter of WRN-16-1's forward pass at ``freeze = mid``). Features larger than
``MAX_CACHED_FEATURES_BYTES`` are not kept: the whole model then runs every round.

The evaluator's model keeps the layout it scores fastest in on its device (``models.memory_layout``): every
round, the start included, is scored by the same model in the same layout.

Each round's record also holds the accuracy on each class of the test set (``with_classes``: from the same logits,
counted on the evaluation device), ``None`` for a class the test set lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord

from data.federated import load_test_set
from data.transforms import to_model_input
from models import NO_FREEZE
from models.memory_layout import to_scoring_layout
from models.outputs import penultimate_features
from models.training import accuracy_per_class, evaluate, logit_scores, predict_logits
from run_config import RunConfig, build_model_for, data_cache, federated_split
from strategies.partial_model import merge_state

#: The most memory the test set's frozen features may take on the server's device.
MAX_CACHED_FEATURES_BYTES = 512 * 2**20


def evaluates(server_round: int, every: int, last_round: int) -> bool:
    """Whether the global model after ``server_round`` is scored centrally (``evaluate-every``): the start (round 0),
    every ``every``-th round and the run's last round."""
    return server_round == 0 or server_round % every == 0 or server_round == last_round


class CentralEvaluation:
    """Test loss and accuracy of the global model {φ, θ} for a round's θ."""

    def __init__(self, config: RunConfig, frozen: Mapping[str, torch.Tensor], device: torch.device) -> None:
        split = federated_split(config)
        test = load_test_set(split, data_cache(config))
        self.inputs = to_model_input(test.images, split.info).to(device)
        self.labels = torch.from_numpy(test.labels).to(device)
        self.num_classes = split.info.num_classes
        self.model = to_scoring_layout(build_model_for(config).to(device), device)
        self.order = list(self.model.state_dict())
        self.frozen, self.batch_size = frozen, config.eval_batch_size
        self.level = config.freeze
        self.features: torch.Tensor | None = None  # φ(x) of the test set
        if (
            self.level != NO_FREEZE
            and len(frozen)
            and len(self.labels)
            and self._feature_bytes() <= MAX_CACHED_FEATURES_BYTES
        ):
            self.features = self._frozen_features()
            del self.inputs  # φ(x) replaces the images

    def _feature_bytes(self) -> int:
        with torch.no_grad():
            row = self.model.eval().forward_to(self.inputs[:1], self.level)
        return row.numel() * row.element_size() * len(self.labels)

    @torch.no_grad()
    def _frozen_features(self) -> torch.Tensor:
        self.model.load_state_dict(self.frozen, strict=False)  # φ's entries; θ's do not enter forward_to
        self.model.eval()
        return predict_logits(lambda x: self.model.forward_to(x, self.level), self.inputs, self.batch_size)

    def of_state(self, state: Mapping[str, torch.Tensor]) -> tuple[float, float]:
        """Test loss and accuracy of a whole model's state (a method's own model, e.g. FedSplit's composed one),
        run on the images: its φ may not be the run's. Only for an evaluator built without a frozen part, which keeps
        the images (one built with φ keeps φ(x) instead)."""
        if self.features is not None:
            raise RuntimeError("of_state needs the test images; build this CentralEvaluation with frozen = {}")
        self.model.load_state_dict(state)
        self.model.eval()
        return evaluate(self.model, self.inputs, self.labels, self.batch_size)

    def _load(self, theta: ArrayRecord) -> None:
        self.model.load_state_dict(merge_state(self.frozen, theta.to_torch_state_dict(), self.order))
        self.model.eval()

    def __call__(self, theta: ArrayRecord) -> tuple[float, float]:
        loss, accuracy, _ = self.with_classes(theta)
        return loss, accuracy

    def with_classes(self, theta: ArrayRecord) -> tuple[float, float, list[float | None]]:
        """Test loss, accuracy and each class's accuracy indexed by class (``None`` for a class with no test sample),
        all from one pass's logits."""
        if len(self.labels) == 0:
            return float("nan"), float("nan"), [None] * self.num_classes
        self._load(theta)
        if self.features is None:
            logits = predict_logits(self.model, self.inputs, self.batch_size)
        else:  # the same batches as the whole model's pass: φ's outputs batch by batch, then θ on each
            logits = predict_logits(lambda h: self.model.forward_from(h, self.level), self.features, self.batch_size)
        loss, accuracy = logit_scores(logits, self.labels)
        return loss, accuracy, accuracy_per_class(logits.argmax(dim=1), self.labels, self.num_classes)

    @torch.no_grad()
    def _penultimate(self) -> torch.Tensor:
        """The input of the final Linear layer for every test sample (from φ's cached outputs when they are held)."""
        if self.features is None:
            return penultimate_features(self.model, self.inputs, self.batch_size)
        features, size = self.features, self.batch_size
        return torch.cat(
            [
                self.model.embed_and_classify(features[i : i + size], self.level)[0]
                for i in range(0, len(features), size)
            ]
        )

    def classifier_accuracies(
        self, theta: ArrayRecord, classifiers: Sequence[tuple[torch.Tensor, torch.Tensor]]
    ) -> list[float]:
        """Test accuracy of each final Linear layer (weight, bias) on the penultimate features of the model {φ, θ}:
        FedFSC's few-shot classifiers on the extractor they were trained on, one forward pass for all of them."""
        if not classifiers:
            return []
        self._load(theta)
        features = self._penultimate()
        device = features.device
        correct = [
            (F.linear(features, w.to(device), b.to(device)).argmax(dim=1) == self.labels).float().mean()
            for w, b in classifiers
        ]
        return torch.stack(correct).tolist()
