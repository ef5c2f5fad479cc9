"""Objects every node derives the same way from the run configuration."""

from __future__ import annotations

from pathlib import Path

import torch

from data.catalog import DatasetInfo
from data.federated import FederatedSplit
from data.loading import dataset_info as read_dataset_info
from data.own_data import Columns
from models import SplitModel, build_model
from run_config.schema import RunConfig


def columns(config: RunConfig) -> Columns:
    """The image and label columns of a user's data saved as a Hugging Face dataset."""
    return config.image_column, config.label_column


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
        columns=columns(config),
    )


def data_cache(config: RunConfig) -> Path | None:
    """Where decoded datasets and splits are shared between the processes of this machine (None: not shared)."""
    return Path(config.data_cache_dir).expanduser() if config.data_cache_dir else None


def dataset_info(config: RunConfig, dataset: str | None = None) -> DatasetInfo:
    """What the models need of the run's dataset (or of ``dataset``, e.g. ``pretrain-dataset``): the catalogue's
    entry, or what was read from the user's own data (``data/own_data.py``)."""
    return read_dataset_info(dataset or config.dataset, config.data_dir, columns(config), data_cache(config))


def build_model_for(config: RunConfig, seed: int | None = None) -> SplitModel:
    """The configured model for the configured dataset; initialised from ``seed`` when given."""
    info = dataset_info(config)
    if seed is not None:
        torch.manual_seed(seed)
    return build_model(
        config.model,
        in_channels=info.channels,
        num_classes=info.num_classes,
        dropout=config.dropout,
        phi_end=config.phi_end,
    )
