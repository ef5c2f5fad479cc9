"""The pretraining phase (SPEC §3, Algorithm 1 line 1): the server's initial global weights.

``pretrain`` selects the source: ``public`` trains the whole model on the server's held-out share of the
target training set; ``dataset`` trains it on another dataset's whole training set and then
re-initialises the classifier for the target's classes (head adaptation: everything but the final Linear
layer is kept); ``checkpoint`` loads a state dict; ``none`` keeps the seeded random initialisation
("FedAvg w/o pretraining"). Trained weights are cached on disk under a key of model, source, seed and
recipe, so every method of a comparison starts from the same weights and pretrains only once.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from logging import INFO, WARNING
from pathlib import Path

import torch
from flwr.common.logger import log

from data.catalog import DATASETS
from data.federated import load_public_split
from data.image_data import ImageData
from data.loading import DataNotFoundError, load_dataset
from data.transforms import to_model_input
from models import SplitModel, build_model
from models.training import train_epochs
from run_config import ConfigError, RunConfig, build_model_for, federated_split
from server_app.torch_files import load_state_dict

#: Fixed part of the pretraining recipe (the learning rate, epochs and batch size are settings).
PRETRAIN_MOMENTUM, PRETRAIN_WEIGHT_DECAY = 0.9, 5e-4
_RECIPE_VERSION = 1


def cache_dir(config: RunConfig) -> Path:
    return Path(config.pretrain_cache_dir or Path.home() / ".cache" / "fedft" / "pretrained").expanduser()


def recipe(config: RunConfig) -> dict:
    """Everything that determines the pretrained weights."""
    source = config.pretrain_dataset if config.pretrain == "dataset" else config.dataset
    return {
        "version": _RECIPE_VERSION,
        "model": config.model,
        "dropout": config.dropout,
        "pretrain": config.pretrain,
        "source": source,
        "public-fraction": config.public_fraction if config.pretrain == "public" else None,
        "target-classes": DATASETS[config.dataset].num_classes,
        "seed": config.seed,
        "epochs": config.pretrain_epochs,
        "learning-rate": config.pretrain_learning_rate,
        "batch-size": config.batch_size,
        "momentum": PRETRAIN_MOMENTUM,
        "weight-decay": PRETRAIN_WEIGHT_DECAY,
    }


def cache_path(config: RunConfig) -> Path:
    key = hashlib.sha256(json.dumps(recipe(config), sort_keys=True).encode()).hexdigest()[:16]
    source = recipe(config)["source"]
    return cache_dir(config) / f"{config.model}-{config.pretrain}-{source}-{key}.pt"


def check_source(config: RunConfig) -> None:
    """Fail at start, naming the key, when the pretraining source cannot be used."""
    if config.pretrain == "public" and config.public_fraction == 0:
        raise ConfigError("run config 'pretrain' = 'public' needs a held-out split: set 'public-fraction' > 0")
    if config.pretrain == "checkpoint" and not Path(config.pretrain_checkpoint).expanduser().is_file():
        raise ConfigError(f"run config 'pretrain-checkpoint' = {config.pretrain_checkpoint!r} is not a readable file")
    if config.pretrain == "dataset":
        source, target = DATASETS[config.pretrain_dataset], DATASETS[config.dataset]
        if source.channels != target.channels:
            raise ConfigError(
                f"run config 'pretrain-dataset' = {config.pretrain_dataset!r} has {source.channels}-channel images "
                f"but dataset {config.dataset!r} has {target.channels}"
            )


def pretrain(model: SplitModel, data: ImageData, dataset: str, config: RunConfig) -> None:
    """Train the whole model on ``data`` with the pretraining recipe (in place)."""
    inputs, labels = to_model_input(data.images, DATASETS[dataset]), torch.from_numpy(data.labels)
    generator = torch.Generator().manual_seed(config.seed)
    model.train()
    for epoch in range(1, config.pretrain_epochs + 1):
        loss = train_epochs(
            model,
            list(model.parameters()),
            inputs,
            labels,
            epochs=1,
            batch_size=config.batch_size,
            lr=config.pretrain_learning_rate,
            momentum=PRETRAIN_MOMENTUM,
            weight_decay=PRETRAIN_WEIGHT_DECAY,
            generator=generator,
        )
        if epoch == 1 or epoch % 10 == 0 or epoch == config.pretrain_epochs:
            log(INFO, "pretraining epoch %d/%d: loss %.4f", epoch, config.pretrain_epochs, loss)


def _pretrained_from_source(config: RunConfig, target: SplitModel) -> dict[str, torch.Tensor]:
    if config.pretrain == "public":
        pretrain(target, load_public_split(federated_split(config)), config.dataset, config)
        return target.state_dict()
    source_info = DATASETS[config.pretrain_dataset]
    torch.manual_seed(config.seed)
    source_model = build_model(config.model, source_info.channels, source_info.num_classes, config.dropout)
    try:
        source = load_dataset(config.pretrain_dataset, config.data_dir).train
    except DataNotFoundError as err:
        raise ConfigError(f"run config 'pretrain-dataset' = {config.pretrain_dataset!r} cannot be loaded: {err}") from None
    pretrain(source_model, source, config.pretrain_dataset, config)
    head = set(target.classifier_keys())
    state = target.state_dict()  # the seeded fresh classifier stays
    state.update({k: v for k, v in source_model.state_dict().items() if k not in head})
    return state


def initial_state(config: RunConfig) -> dict[str, torch.Tensor]:
    """The initial global model for this run (pretrained as configured, cached)."""
    model = build_model_for(config, seed=config.seed)
    if config.pretrain == "none":
        return model.state_dict()
    if config.pretrain == "checkpoint":
        try:
            state = load_state_dict(Path(config.pretrain_checkpoint).expanduser())
        except ValueError as err:
            raise ConfigError(f"run config 'pretrain-checkpoint' = {config.pretrain_checkpoint!r}: {err}") from None
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise ConfigError(f"run config 'pretrain-checkpoint' does not fit model {config.model!r}: {err}") from None
        return model.state_dict()
    path = cache_path(config)
    if path.is_file():
        try:
            state = load_state_dict(path)
            log(INFO, "pretrained weights from cache %s", path)
            return state
        except ValueError as err:
            log(WARNING, "ignoring the pretraining cache: %s; pretraining again", err)
    tick = time.perf_counter()
    state = _pretrained_from_source(config, model)
    log(INFO, "pretraining took %.1f s; caching it at %s", time.perf_counter() - tick, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(state, partial)
    partial.replace(path)  # atomic: concurrent runs never read a half-written file
    return state
