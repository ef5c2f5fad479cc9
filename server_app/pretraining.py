"""The pretraining phase (FedFT-EDS paper, Algorithm 1 line 1): the server's initial global weights.

``pretrain`` selects the source: ``public`` trains the whole model on the server's held-out share of the
target training set; ``dataset`` trains it on another dataset's whole training set and then
re-initialises the classifier for the target's classes (head adaptation: everything but the final Linear
layer is kept); ``checkpoint`` loads a state dict (``server_app/pretrained_checkpoint.py``); ``none`` keeps the
seeded random initialisation ("FedAvg w/o pretraining"). Trained weights are cached on disk under a key of the model
(a user's: its module's code too), the source's data (a catalogued dataset's files by name, size and content; a
user's folder by its path and its files' names, sizes and modification times: two folders never share an entry), the
seed and the recipe, so every method of a comparison starts from the same weights and
pretrains only once.

The recipe is built to be stable, since FedFT's premise is a good pretrained model: a stratified tenth of the
source is held out for validation; SGD (momentum 0.9, weight decay 5e-4) follows a linear warm-up then a cosine
decay of the learning rate; after the first, every tenth and the final epoch the BatchNorm running statistics are
re-estimated for the current weights (training mode keeps stale ones: a constant-rate run once scored 16.5% on the
test set for want of this) and the epoch is scored on the validation slice. Only the final re-estimation reaches
the kept weights (training-mode BatchNorm normalises by the batch's statistics, never the running ones), so scoring
fewer epochs changes nothing but the report, and saves about a third of the pretraining's time (the re-estimation
is a forward pass over up to 4,096 images). The final epoch's weights are kept, the end of the cosine decay:
over seeds 0-2 and 1 and 2 threads they scored 78.4-79.5% on the default test set, where the epoch with the lowest
validation loss (120 images) scored 75.8-79.4%, once 3.5 points below its run's final epoch. The validation slice
reports the kept model's accuracy and the scored epochs', and stops a run whose final loss is not a number. What it
did is stored beside the cached weights (``<file>.json``) and reported in the run's summary.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

import torch
from flwr.common.logger import log

from data.catalog import DATASETS, DatasetInfo
from data.federated import load_public_split
from data.image_data import ImageData
from data.loading import DataNotFoundError, dataset_source, load_dataset
from data.own_data import is_own_dataset
from data.partitioning import split_public
from data.transforms import to_model_input
from models import SplitModel, build_model
from models.batchnorm import settle_batchnorm
from models.device import compute_description
from models.training import cross_entropy_of, evaluate, sgd, train_epochs
from models.user_model import is_user_model, source_digest
from run_config import ConfigError, RunConfig, build_model_for, data_cache, dataset_info, federated_split
from run_config.derived import columns
from run_config.model_check import check_model, takes
from server_app.atomic_write import replace_file, replace_text
from server_app.background import Cancelled
from server_app.pretrained_checkpoint import load_checkpoint
from server_app.torch_files import load_state_dict

CPU = torch.device("cpu")
#: Fixed part of the pretraining recipe (the learning rate, epochs and batch size are settings).
PRETRAIN_MOMENTUM, PRETRAIN_WEIGHT_DECAY = 0.9, 5e-4
#: Share of the source held out to choose the best epoch; warm-up share of the epochs.
VALIDATION_FRACTION, WARMUP_FRACTION = 0.1, 0.1
#: At most this many source samples settle the BatchNorm statistics after each scored epoch (``models/batchnorm.py``),
#: in passes of at most ``BATCHNORM_BATCH_SIZE``: the cumulative average weighs every pass alike, so the split into
#: passes is part of the recipe.
BATCHNORM_SAMPLES, BATCHNORM_BATCH_SIZE = 4096, 500
#: Besides the first and the final epoch, every this many epochs is scored on the validation slice.
SCORED_EPOCH_INTERVAL = 10
#: Bumped whenever the recipe changes what it produces (2: warm-up + cosine, best epoch, re-estimated BatchNorm;
#: 3: the final epoch; 4: statistics settled in near-equal passes, models/batchnorm.py).
RECIPE_VERSION = 4


def cache_dir(config: RunConfig) -> Path:
    return Path(config.pretrain_cache_dir or Path.home() / ".cache" / "fedft" / "pretrained").expanduser()


def source_fingerprint(config: RunConfig, dataset: str) -> str | None:
    """A digest of what identifies ``dataset``'s data (``dataset_source``: a catalogued dataset's files by name, size
    and content; a user's folder by its files), or None for the hub's."""
    try:
        source = dataset_source(dataset, config.data_dir, columns(config))
    except DataNotFoundError as err:
        key = "pretrain-dataset" if dataset == config.pretrain_dataset and config.pretrain == "dataset" else "dataset"
        raise ConfigError(f"run config {key!r} = {dataset!r} cannot be loaded: {err}") from None
    return None if source is None else hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()


def recipe(config: RunConfig) -> dict:
    """Everything that determines the pretrained weights."""
    source = config.pretrain_dataset if config.pretrain == "dataset" else config.dataset
    user_model = is_user_model(config.model)
    return {
        "version": RECIPE_VERSION,
        "model": config.model,
        "model-code": source_digest(config.model) if user_model else None,
        "phi-end": config.phi_end if user_model else None,
        "dropout": config.dropout,
        "pretrain": config.pretrain,
        "source": source,
        "source-data": source_fingerprint(config, source),
        "public-fraction": config.public_fraction if config.pretrain == "public" else None,
        "target-classes": dataset_info(config).num_classes,
        "seed": config.seed,
        "samples": config.pretrain_samples,
        "epochs": config.pretrain_epochs,
        "learning-rate": config.pretrain_learning_rate,
        "batch-size": config.pretrain_batch_size,
        "momentum": PRETRAIN_MOMENTUM,
        "weight-decay": PRETRAIN_WEIGHT_DECAY,
        "validation-fraction": VALIDATION_FRACTION,
        "warmup-fraction": WARMUP_FRACTION,
        "batchnorm-samples": BATCHNORM_SAMPLES,
        "selection": "final epoch",
    }


def _file_label(name: str) -> str:
    """A part of a cache file's name for a model or dataset name (a user's folder: its last part)."""
    return re.sub(r"[^A-Za-z0-9._+=-]", "_", Path(name).name if is_own_dataset(name) else name)


def cache_path(config: RunConfig) -> Path:
    key = hashlib.sha256(json.dumps(recipe(config), sort_keys=True).encode()).hexdigest()[:16]
    source = recipe(config)["source"]
    return cache_dir(config) / f"{_file_label(config.model)}-{config.pretrain}-{_file_label(source)}-{key}.pt"


def _images(info: DatasetInfo) -> str:
    channels, height, width = info.input_shape
    return f"{channels}-channel {height}x{width} images"


def _source_fits(config: RunConfig) -> None:
    """``ConfigError`` saying what to do instead when the model pretrained on ``pretrain-dataset`` cannot take the
    dataset's images (other channels, or a size the model takes for one and not the other)."""
    source, target = dataset_info(config, config.pretrain_dataset), dataset_info(config)
    if source.input_shape == target.input_shape:
        return
    if source.channels == target.channels:
        model = build_model(config.model, source.channels, source.num_classes, config.dropout, config.phi_end)
        if takes(model, source.input_shape) is None:
            return  # another size, which the model takes: it pretrains on one and fine-tunes on the other
    alike = [
        name
        for name, info in DATASETS.items()
        if info.input_shape == target.input_shape and name not in ("synthetic", config.dataset)
    ]
    other = f", on a dataset of such images (pretrain-dataset={alike[0]!r})" if alike else ""
    raise ConfigError(
        f"run config 'pretrain-dataset' = {config.pretrain_dataset!r} has {_images(source)} but dataset "
        f"{config.dataset!r} has {_images(target)}: pretrain on the dataset's own held-out share (pretrain='public')"
        f"{other}, from a state dict (pretrain='checkpoint' pretrain-checkpoint=...) or not at all (pretrain='none')"
    )


def check_source(config: RunConfig) -> None:
    """Fail at start, naming the key, when the model cannot take the data or the pretraining source cannot be used:
    for ``checkpoint``, the file is loaded and checked against the model (``load_checkpoint``)."""
    for line in check_model(config):
        log(INFO, "%s", line)
    if config.pretrain == "public" and config.public_fraction == 0:
        raise ConfigError("run config 'pretrain' = 'public' needs a held-out split: set 'public-fraction' > 0")
    if config.pretrain == "checkpoint":
        load_checkpoint(config, build_model_for(config, seed=config.seed))
    if config.pretrain == "dataset":
        _source_fits(config)


def learning_rate_at(epoch: int, epochs: int, base: float) -> float:
    """Epoch ``epoch`` (from 1) of ``epochs``: a linear warm-up over the first tenth, then a cosine decay to 0,
    each epoch taking the rate at its middle."""
    warmup = max(1, round(WARMUP_FRACTION * epochs))
    if epoch <= warmup:
        return base * (epoch - 0.5) / warmup
    progress = (epoch - warmup - 0.5) / max(epochs - warmup, 1)
    return base * 0.5 * (1.0 + math.cos(math.pi * progress))


def pretrain(
    model: SplitModel,
    data: ImageData,
    dataset: str,
    config: RunConfig,
    device: torch.device,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Train the whole model on ``data`` with the pretraining recipe (in place, on ``device``), scoring the first,
    every ``SCORED_EPOCH_INTERVAL``-th and the final epoch on a held-out slice. Returns what happened (the kept epoch,
    its validation accuracy, the scored epochs', ...). ``stop``, once set, ends the training at its next mini-batch
    with ``Cancelled``."""
    info = dataset_info(config, dataset)
    fit_rows, validation_rows = split_public(data.labels, VALIDATION_FRACTION, config.seed)
    inputs = to_model_input(data.images, info).to(device)
    labels = torch.from_numpy(data.labels).to(device)
    fit_rows_t, validation_rows_t = torch.from_numpy(fit_rows).to(device), torch.from_numpy(validation_rows).to(device)
    fit_inputs, fit_labels = inputs[fit_rows_t], labels[fit_rows_t]
    validation_inputs, validation_labels = inputs[validation_rows_t], labels[validation_rows_t]
    batchnorm_inputs = fit_inputs[:BATCHNORM_SAMPLES]
    model.to(device)
    generator = torch.Generator().manual_seed(config.seed)
    params = list(model.parameters())
    optimizer = sgd(params, config.pretrain_learning_rate, PRETRAIN_MOMENTUM, PRETRAIN_WEIGHT_DECAY)
    curve: dict[str, float] = {}  # epoch (as JSON keys it) -> validation accuracy
    cross_entropy = cross_entropy_of(model)

    def loss_fn(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if stop is not None and stop.is_set():
            raise Cancelled("pretraining cancelled")
        return cross_entropy(inputs, labels)

    for epoch in range(1, config.pretrain_epochs + 1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(epoch, config.pretrain_epochs, config.pretrain_learning_rate)
        model.train()
        loss = train_epochs(
            loss_fn,
            params,
            fit_inputs,
            fit_labels,
            epochs=1,
            batch_size=config.pretrain_batch_size,
            generator=generator,
            optimizer=optimizer,
        )
        if epoch == 1 or epoch % SCORED_EPOCH_INTERVAL == 0 or epoch == config.pretrain_epochs:
            settle_batchnorm(model, batchnorm_inputs, batch_size=BATCHNORM_BATCH_SIZE)
            model.eval()
            validation_loss, accuracy = evaluate(model, validation_inputs, validation_labels, config.eval_batch_size)
            curve[str(epoch)] = accuracy
            log(
                INFO,
                "pretraining epoch %d/%d: loss %.4f, validation accuracy %.4f",
                epoch,
                config.pretrain_epochs,
                loss,
                accuracy,
            )
    if not math.isfinite(loss) or (len(validation_rows) > 0 and not math.isfinite(validation_loss)):
        raise ConfigError(
            "pretraining diverged (its final loss is not a number): lower 'pretrain-learning-rate' "
            f"(now {config.pretrain_learning_rate:g})"
        )
    log(INFO, "pretraining keeps its final epoch (validation accuracy %.4f)", accuracy)
    return {
        "kept_epoch": config.pretrain_epochs,
        "validation_loss": validation_loss,
        "validation_accuracy": accuracy,
        "validation_accuracy_by_epoch": curve,
        "train_loss": loss,
        "recipe_version": RECIPE_VERSION,
        "epochs": config.pretrain_epochs,
        "fit_samples": len(fit_rows),
        "validation_samples": len(validation_rows),
        "device": str(device),
        "machine": compute_description(device),
    }


def source_sample(source: ImageData, config: RunConfig) -> ImageData:
    """The ``pretrain-samples`` images of ``source`` the server pretrains on: a stratified draw seeded by ``seed``
    (every image when the setting is 0 or at least the source's size)."""
    if config.pretrain_samples == 0 or config.pretrain_samples >= len(source):
        return source
    _, kept = split_public(source.labels, config.pretrain_samples / len(source), config.seed)
    return source.subset(kept)


def _pretrained_from_source(
    config: RunConfig, target: SplitModel, device: torch.device, stop: threading.Event | None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    if config.pretrain == "public":
        public = load_public_split(federated_split(config), data_cache(config))
        report = pretrain(target, source_sample(public, config), config.dataset, config, device, stop)
        return target.state_dict(), report
    source_info = dataset_info(config, config.pretrain_dataset)
    torch.manual_seed(config.seed)
    source_model = build_model(
        config.model, source_info.channels, source_info.num_classes, config.dropout, config.phi_end
    )
    try:
        source = load_dataset(config.pretrain_dataset, config.data_dir, columns(config)).train
    except DataNotFoundError as err:
        raise ConfigError(
            f"run config 'pretrain-dataset' = {config.pretrain_dataset!r} cannot be loaded: {err}"
        ) from None
    report = pretrain(source_model, source_sample(source, config), config.pretrain_dataset, config, device, stop)
    head = set(target.classifier_keys())
    state = target.state_dict()  # the seeded fresh classifier stays
    state.update({k: v for k, v in source_model.state_dict().items() if k not in head})
    return state, report


def _report_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def pretraining_report(config: RunConfig) -> dict[str, Any] | None:
    """What the cached pretraining of this configuration did (best epoch, validation accuracy, ...), if known; for a
    checkpoint, the file, its SHA-256 and the classifier it did not provide."""
    if config.pretrain == "checkpoint":
        return load_checkpoint(config, build_model_for(config, seed=config.seed)).report()
    if config.pretrain not in ("public", "dataset"):
        return None
    try:
        return json.loads(_report_path(cache_path(config)).read_text())
    except (OSError, ValueError):
        return None


def initial_state(
    config: RunConfig, device: torch.device = CPU, stop: threading.Event | None = None
) -> dict[str, torch.Tensor]:
    """The initial global model for this run (pretrained as configured on ``device``, cached), on the CPU: the
    cache does not depend on the device that made it. ``stop`` (set) cancels pretraining (see ``pretrain``)."""
    model = build_model_for(config, seed=config.seed)
    if config.pretrain == "none":
        return model.state_dict()
    if config.pretrain == "checkpoint":
        loaded = load_checkpoint(config, model)
        log(INFO, "initial weights from the checkpoint %s (sha256 %s)", loaded.path, loaded.sha256)
        if loaded.new_head:
            log(
                INFO,
                "the checkpoint's classifier (%s classes) does not fit the dataset's %d: a new one (%s), seeded by "
                "'seed'",
                loaded.checkpoint_classes if loaded.checkpoint_classes is not None else "no",
                dataset_info(config).num_classes,
                ", ".join(loaded.new_head),
            )
        return loaded.state
    path = cache_path(config)
    if path.is_file():
        try:
            state = load_state_dict(path)
            seconds = (pretraining_report(config) or {}).get("seconds")
            took = f" (pretrained earlier in {seconds:.1f} s)" if isinstance(seconds, (int, float)) else ""
            log(INFO, "pretrained weights from cache %s%s", path, took)
            return state
        except ValueError as err:
            log(WARNING, "ignoring the pretraining cache: %s; pretraining again", err)
    tick = time.perf_counter()
    state, report = _pretrained_from_source(config, model, device, stop)
    state = {k: v.detach().cpu() for k, v in state.items()}
    report["seconds"] = time.perf_counter() - tick  # the whole phase (source loaded, trained, settled): one number
    log(INFO, "pretraining took %.1f s on %s; caching it at %s", report["seconds"], device, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(_report_path(path), json.dumps(report, indent=1) + "\n")
    replace_file(path, lambda handle: torch.save(state, handle))
    return state
