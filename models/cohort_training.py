"""Several clients' local SGD run as one batched computation: ``torch.func.vmap`` over their stacked parameters.

A simulated cohort of small models leaves the hardware idle one client at a time (a LeNet-5 step on 32 images is a
few hundred microseconds of work, most of it overhead). ``train_cohort`` trains every client of a cohort together:
each client keeps its own parameters, data, batch order (drawn from its own generator exactly as ``train_epochs``
draws it), momentum buffer and number of steps; at each step the clients whose next mini-batch has the same shape
take one ``vmap``-ed gradient step, and a client that has run out of batches stops. The arithmetic is
``train_epochs``'s with the plain cross-entropy, so the trained parameters equal the one-client-at-a-time path's to
float tolerance (``tests/test_cohort_training.py``).

BatchNorm layers being trained normalise by their batch's statistics, as in training; their running statistics are
not updated here (the caller settles them afterwards, ``models/batchnorm.py``, which discards whatever training
left in them). Dropout draws an independent mask per client (``randomness="different"``), not the masks the
one-at-a-time path would draw.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap
from torch.nn.modules.batchnorm import _BatchNorm

from models.training import Augment, LossFn, minibatches, train_epochs


@dataclass
class ClientJob:
    """One client's local training for a round: ``module(x)`` gives the logits of the round's inputs and
    ``params`` (its trained parameters, by name in ``module``) are updated in place."""

    module: nn.Module
    params: dict[str, nn.Parameter]
    inputs: torch.Tensor
    labels: torch.Tensor
    epochs: int
    batch_size: int
    lr: float
    momentum: float
    weight_decay: float
    generator: torch.Generator
    augment: Augment | None = None
    client: int = 0  # the client's partition id, for messages and a deterministic order


class CohortError(ValueError):
    """Clients that cannot be trained as one computation (their parameters or hyperparameters differ)."""


def batches(job: ClientJob) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The job's mini-batches, as ``train_epochs`` draws them from the job's generator."""
    return minibatches(
        job.inputs,
        job.labels,
        epochs=job.epochs,
        batch_size=job.batch_size,
        generator=job.generator,
        augment=job.augment,
    )


def train_alone(job: ClientJob, loss: LossFn) -> float:
    """The job's epochs on their own, under ``loss`` (``train_epochs`` with the job's settings); the mean loss."""
    return train_epochs(
        loss,
        list(job.params.values()),
        job.inputs,
        job.labels,
        epochs=job.epochs,
        batch_size=job.batch_size,
        lr=job.lr,
        momentum=job.momentum,
        weight_decay=job.weight_decay,
        generator=job.generator,
        augment=job.augment,
    )


def check_cohort(jobs: Sequence[ClientJob]) -> None:
    """Refuse clients whose trained parameters (names, shapes, dtypes, device), model or SGD settings differ from
    the first's, naming both clients."""
    first = jobs[0]
    shape = {name: (p.shape, p.dtype, p.device) for name, p in first.params.items()}
    settings = (first.lr, first.momentum, first.weight_decay, type(first.module))
    for job in jobs[1:]:
        if {name: (p.shape, p.dtype, p.device) for name, p in job.params.items()} != shape:
            raise CohortError(f"clients {first.client} and {job.client} train different parameters: no one cohort")
        if (job.lr, job.momentum, job.weight_decay, type(job.module)) != settings:
            raise CohortError(f"clients {first.client} and {job.client} differ in model or SGD settings: no one cohort")


def stateless_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` whose BatchNorm layers in train mode keep no running statistics (``vmap`` cannot update a
    buffer shared by the clients; batch statistics are what training normalises by either way)."""
    template = copy.deepcopy(module)
    for layer in template.modules():
        if isinstance(layer, _BatchNorm) and layer.training:
            layer.running_mean = None
            layer.running_var = None
            layer.num_batches_tracked = None
            layer.track_running_stats = False
    return template


def train_cohort(jobs: Sequence[ClientJob]) -> list[float]:
    """Train every job's parameters as ``train_epochs`` would, together; return each job's mean loss."""
    if not jobs:
        return []
    check_cohort(jobs)
    first = jobs[0]
    names = list(first.params)
    template = stateless_copy(first.module)
    device = next(iter(first.params.values())).device

    def loss_of(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(template, params, (x,)), y)

    step = vmap(grad_and_value(loss_of), randomness="different")
    with torch.no_grad():
        stacked = {name: torch.stack([job.params[name].detach() for job in jobs]) for name in names}
    buffers: dict[str, torch.Tensor] = {name: torch.zeros_like(value) for name, value in stacked.items()}
    totals = torch.zeros(len(jobs), dtype=stacked[names[0]].dtype, device=device)
    counts = [0] * len(jobs)
    streams = {index: batches(job) for index, job in enumerate(jobs)}
    while streams:
        groups: dict[torch.Size, list[tuple[int, torch.Tensor, torch.Tensor]]] = {}
        for index, stream in list(streams.items()):
            batch = next(stream, None)
            if batch is None:
                del streams[index]
                continue
            groups.setdefault(batch[0].shape, []).append((index, *batch))
        for members in groups.values():
            _step_group(step, stacked, buffers, members, first, len(jobs), totals, counts)
    with torch.no_grad():
        for index, job in enumerate(jobs):
            for name in names:
                job.params[name].copy_(stacked[name][index])
    return [total / max(count, 1) for total, count in zip(totals.tolist(), counts, strict=True)]


GradStep = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], tuple[dict[str, torch.Tensor], torch.Tensor]]


@torch.no_grad()
def _step_group(
    step: GradStep,
    stacked: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    members: list[tuple[int, torch.Tensor, torch.Tensor]],
    settings: ClientJob,
    cohort_size: int,
    totals: torch.Tensor,
    counts: list[int],
) -> None:
    """One SGD step (``models/sgd.py``'s arithmetic) for the clients in ``members``, whose batches share a shape."""
    indices = [index for index, _, _ in members]
    everyone = indices == list(range(cohort_size))
    rows = None if everyone else torch.tensor(indices, device=totals.device)
    params = stacked if rows is None else {name: value.index_select(0, rows) for name, value in stacked.items()}
    x = torch.stack([x for _, x, _ in members])
    y = torch.stack([y for _, _, y in members])
    with torch.enable_grad():
        grads, losses = step(params, x, y)
    for name, grad in grads.items():
        param = params[name]
        if settings.weight_decay != 0:
            grad = grad.add(param, alpha=settings.weight_decay)
        if settings.momentum != 0:
            buffer = buffers[name] if rows is None else buffers[name].index_select(0, rows)
            buffer.mul_(settings.momentum).add_(grad)
            grad = buffer
            if rows is not None:
                buffers[name].index_copy_(0, rows, buffer)
        param.add_(grad, alpha=-settings.lr)
        if rows is not None:
            stacked[name].index_copy_(0, rows, param)
    size = y.shape[1]
    if rows is None:
        totals += losses.detach() * size
    else:
        totals.index_add_(0, rows, losses.detach() * size)
    for index in indices:
        counts[index] += size
