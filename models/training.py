"""Mini-batch SGD and evaluation over tensors held on one device.

The training loop takes a loss function of a mini-batch and the list of parameters to train, so the same code
trains a whole model (FedAvg), only its upper part θ on cached features (FedFT), with any local objective
(cross-entropy, FedProx's proximal term, MOON's contrastive term), or pretrains on the server. They run
on the device the inputs are on: batch orders are drawn on the CPU (so they do not depend on the device) and
moved there once per epoch, and the loss is summed on the device and read once at the end (no host
synchronisation per batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

from models.sgd import SGD

Forward = Callable[[torch.Tensor], torch.Tensor]
#: (mini-batch inputs, their labels) -> the loss to minimise
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def cross_entropy_of(forward: Forward) -> LossFn:
    """The cross-entropy of ``forward``'s logits."""
    return lambda inputs, labels: F.cross_entropy(forward(inputs), labels)


def sgd(params: Sequence[torch.nn.Parameter], lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> SGD:
    """The optimiser every loop here uses (``torch.optim.SGD``'s arithmetic, without its import cost)."""
    return SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)


def minibatches(
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    augment: Augment | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``epochs`` passes of shuffled mini-batches (inputs, labels): each epoch's order drawn from ``generator`` on the
    CPU and moved to the inputs' device once, crops (``augment``) drawn from it batch by batch."""
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator).to(inputs.device)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            x = inputs[batch]
            if augment is not None:
                x = augment(x, generator)
            yield x, labels[batch]


def train_epochs(
    loss_fn: LossFn,
    params: Sequence[torch.nn.Parameter],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float = 0.0,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    generator: torch.Generator | None = None,
    augment: Augment | None = None,
    optimizer: SGD | torch.optim.Optimizer | None = None,
) -> float:
    """Train ``params`` with SGD for ``epochs`` passes over shuffled mini-batches of ``loss_fn``; return the mean loss.

    ``inputs`` and ``labels`` must be on the device the loss computes on. ``optimizer`` (e.g. one whose learning
    rate a schedule sets) replaces the SGD built from ``lr``, ``momentum`` and ``weight_decay``.
    """
    generator = generator or torch.Generator().manual_seed(0)
    optimizer = optimizer or sgd(params, lr, momentum, weight_decay)
    total = torch.zeros((), device=inputs.device)
    count = 0
    for x, y in minibatches(inputs, labels, epochs=epochs, batch_size=batch_size, generator=generator, augment=augment):
        loss = loss_fn(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(y)
        count += len(y)
    return float(total / max(count, 1))


@torch.no_grad()
def predict_logits(forward: Forward, inputs: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``forward``'s outputs for all inputs, computed in batches and written into one preallocated tensor (not
    gathered and concatenated, which holds every output twice: the full Fashion-MNIST test set's φ(x) at ``mid``
    is 0.3 GiB)."""
    if len(inputs) == 0:
        return forward(inputs)
    first = forward(inputs[:batch_size])
    outputs = first.new_empty((len(inputs), *first.shape[1:]))
    outputs[: len(first)] = first
    del first
    for start in range(batch_size, len(inputs), batch_size):
        outputs[start : start + batch_size] = forward(inputs[start : start + batch_size])
    return outputs


@torch.no_grad()
def evaluate(forward: Forward, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int) -> tuple[float, float]:
    """Mean cross-entropy loss and accuracy (fraction in [0, 1])."""
    if len(labels) == 0:
        return float("nan"), float("nan")
    return logit_scores(predict_logits(forward, inputs, batch_size), labels)


def logit_scores(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Mean cross-entropy loss and accuracy (fraction in [0, 1]) of logits for a non-empty set of labels."""
    loss = F.cross_entropy(logits, labels).item()
    accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
    return loss, accuracy


def accuracy_per_class(predictions: torch.Tensor, labels: torch.Tensor, num_classes: int) -> list[float | None]:
    """Each class's accuracy (fraction in [0, 1]) of the predicted classes, indexed by class in
    ``range(num_classes)``; ``None`` for a class with no sample among ``labels``. Labels must lie in that range.
    Integer counts on the tensors' device (``bincount`` without weights: deterministic on CUDA too), read once."""
    total = torch.bincount(labels, minlength=num_classes)
    correct = torch.bincount(labels[predictions == labels], minlength=num_classes)
    return [c / t if t else None for c, t in zip(correct.tolist(), total.tolist(), strict=True)]
