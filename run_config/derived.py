"""Objects every node derives the same way from the run configuration."""

from __future__ import annotations

from pathlib import Path

import torch

from data.catalog import DATASETS
from data.federated import FederatedSplit
from models import SplitModel, build_model
from run_config.schema import RunConfig


def federated_split(config: RunConfig) -> FederatedSplit:
    """How the dataset is divided between the server and the clients."""
    return FederatedSplit(
        dataset=config.dataset,
        data_dir=config.data_dir,
        partitioner=config.partitioner,
        dirichlet_alpha=config.dirichlet_alpha,
        min_partition_size=config.min_partition_size,
        self_balancing=config.self_balancing,
        classes_per_client=config.classes_per_client,
        public_fraction=config.public_fraction,
        seed=config.seed,
    )


def data_cache(config: RunConfig) -> Path | None:
    """Where decoded datasets and splits are shared between the processes of this machine (None: not shared)."""
    return Path(config.data_cache_dir).expanduser() if config.data_cache_dir else None


def build_model_for(config: RunConfig, seed: int | None = None) -> SplitModel:
    """The configured model for the configured dataset; initialised from ``seed`` when given."""
    info = DATASETS[config.dataset]
    if seed is not None:
        torch.manual_seed(seed)
    return build_model(config.model, in_channels=info.channels, num_classes=info.num_classes, dropout=config.dropout)
