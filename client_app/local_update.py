"""One client's work in a round: local SGD on the received model."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from client_app.local_data import LocalData
from data.transforms import random_crop_flip
from models import SplitModel
from models.training import train_epochs
from run_config import RunConfig


@dataclass(frozen=True)
class UpdateResult:
    """What the client reports about its round."""

    num_examples: int  # samples trained on (the aggregation weight)
    num_local: int  # samples the client holds
    train_loss: float
    train_seconds: float


def round_seed(seed: int, server_round: int, partition_id: int) -> int:
    """A distinct, reproducible seed for each client in each round."""
    return int(np.random.SeedSequence([seed, server_round, partition_id]).generate_state(1)[0])


def local_update(
    model: SplitModel, data: LocalData, config: RunConfig, *, server_round: int, partition_id: int, learning_rate: float
) -> UpdateResult:
    """Train the whole model for ``local-epochs`` on all local data (FedAvg's client update)."""
    start = time.perf_counter()
    seed = round_seed(config.seed, server_round, partition_id)
    torch.manual_seed(seed)  # dropout masks
    model.train()
    loss = train_epochs(
        model,
        list(model.parameters()),
        data.inputs,
        data.labels,
        epochs=config.local_epochs,
        batch_size=config.batch_size,
        lr=learning_rate,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        generator=torch.Generator().manual_seed(seed),
        augment=random_crop_flip if config.augment else None,
    )
    return UpdateResult(len(data), len(data), loss, time.perf_counter() - start)
