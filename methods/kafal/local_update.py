"""A KAFAL client's local update (Alg. 2): SGD on the KCFU loss over its labelled pool, with a batch of its
unlabelled pool beside every labelled batch for the compensation term, the downloaded global model as teacher.

One pass over the labelled pool per epoch (shuffled on the CPU generator); the unlabelled batches come from a
permutation of the unlabelled pool that is redrawn each time it is used up, so every unlabelled sample is seen
before any repeats. Everything lives on the model's device; the loss terms are summed there and read once at the
end (no host synchronisation per batch). LL4AL's loss-prediction module, when given, trains in the same steps on the
model's detached level features (see ``queries/learning_loss.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from methods.kafal.kcfu import KCFUOptions, class_terms, kcfu_loss
from methods.kafal.queries.learning_loss import LossPredictionModule, loss_prediction_loss
from models.batchnorm import settle_batchnorm
from models.split_model import SplitModel
from models.training import sgd, train_epochs


@dataclass(frozen=True)
class LocalSGD:
    """The local optimisation: epochs over the labelled pool, batch size (both pools), SGD's hyperparameters."""

    epochs: int
    batch_size: int
    learning_rate: float
    momentum: float
    weight_decay: float


@dataclass(frozen=True)
class KCFUResult:
    """Mean losses over the update's steps (``compensation_loss`` is 0 when the term was off)."""

    loss: float
    client_loss: float
    compensation_loss: float


class UnlabelledBatches:
    """Batches of ``inputs`` (on their device) in permutations drawn from a CPU ``generator``, one after another."""

    def __init__(self, inputs: torch.Tensor, batch_size: int, generator: torch.Generator) -> None:
        self.inputs, self.batch_size, self.generator = inputs, batch_size, generator
        self._order = torch.empty(0, dtype=torch.long, device=inputs.device)
        self._next = 0

    def next(self) -> torch.Tensor | None:
        """The next batch (at most ``batch_size`` samples; None when the pool is empty)."""
        if len(self.inputs) == 0:
            return None
        if self._next >= len(self._order):
            self._order = torch.randperm(len(self.inputs), generator=self.generator).to(self.inputs.device)
            self._next = 0
        batch = self._order[self._next : self._next + self.batch_size]
        self._next += self.batch_size
        return self.inputs[batch]


def kcfu_update(
    model: SplitModel,
    labelled_inputs: torch.Tensor,
    labels: torch.Tensor,
    unlabelled_inputs: torch.Tensor,
    class_counts: torch.Tensor,
    optimisation: LocalSGD,
    options: KCFUOptions,
    *,
    compensate: bool,
    generator: torch.Generator,
    loss_module: LossPredictionModule | None = None,
) -> KCFUResult:
    """Train ``model`` (in place, on its device) from its current weights, the downloaded global model, which is kept
    as the frozen teacher. ``class_counts`` are the labelled pool's per class; ``compensate`` is False in a cycle's
    first round (Alg. 2, t = 1). ``loss_module`` (LL4AL) trains beside the model when given."""
    device = labelled_inputs.device
    teacher = copy.deepcopy(model).eval()  # eval: BatchNorm's running statistics, as a deployed global model
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    model.train()
    terms = class_terms(class_counts, options, device)
    unlabelled = UnlabelledBatches(unlabelled_inputs, optimisation.batch_size, generator)
    sums = torch.zeros(2, device=device)
    steps = 0
    levels: list[torch.Tensor] = []

    def student(x: torch.Tensor) -> torch.Tensor:
        if loss_module is None or levels:
            return model(x)
        logits, features = model.forward_with_levels(x)  # the labelled batch: its features feed LL4AL
        levels.extend([f.detach() for f in features.values()])
        levels.append(logits.detach())
        return logits

    def loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        nonlocal steps
        levels.clear()
        result = kcfu_loss(student, teacher, x, y, unlabelled.next(), terms, generator, options, compensate)
        total = result.total
        if loss_module is not None:
            *features, logits = levels
            adjusted = logits if terms.log_counts is None else logits + terms.log_counts
            target = F.cross_entropy(adjusted, y, reduction="none")
            total = total + loss_prediction_loss(loss_module(features), target)
        sums[0] += result.client
        if result.compensation is not None:
            sums[1] += result.compensation
        steps += 1
        return total

    params = list(model.parameters()) + (list(loss_module.parameters()) if loss_module is not None else [])
    if loss_module is not None:
        loss_module.train()
    optimiser = sgd(params, optimisation.learning_rate, optimisation.momentum, optimisation.weight_decay)
    loss = train_epochs(
        loss_fn,
        params,
        labelled_inputs,
        labels,
        epochs=optimisation.epochs,
        batch_size=optimisation.batch_size,
        generator=generator,
        optimizer=optimiser,
    )
    settle_batchnorm(model, labelled_inputs)  # the statistics of the labelled pool it trained on, dropout off
    means = (sums / max(steps, 1)).tolist()
    return KCFUResult(loss, means[0], means[1])
