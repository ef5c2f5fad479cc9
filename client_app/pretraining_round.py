"""A client's part of the pretraining round (thesis §6.4.1, step 2 of the pretraining phase; Alg. 6 line 1): "each
client trains the distributed model locally until convergence", with no deadline.

The whole received model is trained on all the local data, one epoch at a time with one SGD optimiser (the run's
learning rate, momentum, weight decay and batch size), until an epoch's mean training loss is not at least
``tolerance`` below the lowest of the epochs before it, or ``max-epochs`` epochs have run (the rule in
``keeps_improving``, as Keras's early stopping with ``min_delta`` and a patience of one epoch). The model after the
last epoch is sent back, its BatchNorm statistics settled on the local data as after every round
(``models/batchnorm.py``), with the round's numbers and the epochs run (``protocol.messages.PRETRAINING_ROUND``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from client_app.local_update import UpdateResult, round_seed
from client_app.node import Node
from client_app.train_step import train_metrics
from data.transforms import random_crop_flip
from models import NO_FREEZE, SplitModel
from models.batchnorm import settle_batchnorm
from models.device import synchronize
from models.training import cross_entropy_of, sgd, train_epochs
from profiling.spans import CLIENT_COMPUTE, CLIENT_DATA, CLIENT_DECODE, span
from protocol.messages import ARRAYS, CONFIG, EPOCHS, MAX_EPOCHS, METRICS, PRETRAINING_ROUND, TOLERANCE
from run_config import build_model_for


def is_pretraining_round(msg: Message) -> bool:
    """Whether a training message asks for the pretraining round's work."""
    return bool(msg.content.config_records[CONFIG].get(PRETRAINING_ROUND, False))


def keeps_improving(losses: Sequence[float], tolerance: float) -> bool:
    """Whether to train another epoch after epochs whose mean training losses are ``losses``: always after none or
    one; afterwards while the last epoch's loss is at least ``tolerance`` below the lowest of the epochs before it. A
    loss that is not a number ends the training (the reply is then refused by the server's checks)."""
    if len(losses) < 2:
        return not losses or math.isfinite(losses[0])
    last = losses[-1]
    return math.isfinite(last) and last <= min(losses[:-1]) - tolerance


def train_until_converged(
    model: SplitModel,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    tolerance: float,
    max_epochs: int,
    batch_size: int,
    learning_rate: float,
    momentum: float,
    weight_decay: float,
    generator: torch.Generator,
    augment: bool = False,
) -> list[float]:
    """Train every parameter of ``model`` (in place) on ``inputs`` until ``keeps_improving`` says stop or
    ``max_epochs`` have run; returns each epoch's mean training loss. One optimiser for all epochs (its momentum
    carries over), one generator for the batch order."""
    model.set_frozen(NO_FREEZE)
    params = list(model.parameters())
    optimizer = sgd(params, learning_rate, momentum, weight_decay)
    loss_fn = cross_entropy_of(model)
    losses: list[float] = []
    while len(losses) < max_epochs and keeps_improving(losses, tolerance):
        losses.append(
            train_epochs(
                loss_fn,
                params,
                inputs,
                labels,
                epochs=1,
                batch_size=batch_size,
                generator=generator,
                optimizer=optimizer,
                augment=random_crop_flip if augment else None,
            )
        )
    return losses


def pretraining_round_train(node: Node, msg: Message) -> RecordDict:
    """The pretraining round on this node: the received whole model trained on all local data until convergence; the
    reply holds the whole model and the round's numbers, with the epochs run."""
    config = msg.content.config_records[CONFIG]
    server_round, learning_rate = node.round_of(msg)
    with span(CLIENT_DATA):
        data = node.data()
    if len(data) == 0:
        raise ValueError("this client holds no data")
    with span(CLIENT_DECODE):
        model = build_model_for(node.config)
        model.load_state_dict(msg.content.array_records[ARRAYS].to_torch_state_dict())
    device = node.device
    settings = node.config
    with span(CLIENT_COMPUTE):
        start = time.perf_counter()
        model.to(device)
        seed = round_seed(settings.seed, server_round, node.partition_id)
        torch.manual_seed(seed)  # dropout masks
        inputs, labels = data.inputs(device), data.labels.to(device)
        losses = train_until_converged(
            model,
            inputs,
            labels,
            tolerance=float(config[TOLERANCE]),  # type: ignore[arg-type]
            max_epochs=int(config[MAX_EPOCHS]),  # type: ignore[arg-type]
            batch_size=settings.batch_size,
            learning_rate=learning_rate,
            momentum=settings.momentum,
            weight_decay=settings.weight_decay,
            generator=torch.Generator().manual_seed(seed),
            augment=settings.augment,
        )
        settle_batchnorm(model, inputs, batch_size=settings.eval_batch_size)
        synchronize(device)
        seconds = time.perf_counter() - start
    result = UpdateResult(len(data), len(data), losses[-1], seconds, 0.0, 0.0, None)
    metrics = MetricRecord({**train_metrics(node.partition_id, result), EPOCHS: len(losses)})
    arrays = ArrayRecord({k: v.cpu() for k, v in model.state_dict().items()})
    return RecordDict({ARRAYS: arrays, METRICS: metrics})
