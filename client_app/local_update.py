"""One client's work in a round (FedFT-EDS paper, Alg. 1): frozen features, data selection, local SGD on θ.

With ``freeze = none`` this is FedAvg's (or FedProx's) update of the whole model. Otherwise φ (the stages
up to the split level) is frozen in eval mode and θ is trained; φ(x) is taken from the feature cache when
possible, so later rounds run only θ. The entropy pass (for entropy selection, or where `entropy-metrics` asks for
it) uses the received model in eval mode, once, before training; the chosen subset is kept for all epochs of the
round. Training ends by settling θ's BatchNorm statistics on the round's training samples
(``models/batchnorm.py``), so the reply is scored as it was trained.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import RecordDict

from client_app.data_selection import hardened_entropy, select_samples, select_unscored
from client_app.epoch_training import EPOCH_TRAINER, ThetaForward
from client_app.feature_cache import FeatureCache
from client_app.feature_sources import Computed, Features
from client_app.local_data import LocalData
from client_app.objective import CrossEntropy, LocalTraining, ObjectiveFactory
from data.transforms import random_crop_flip
from models import NO_FREEZE, SplitModel
from models.batchnorm import settle_batchnorm
from models.cohort_training import ClientJob
from models.device import synchronize
from models.training import Forward
from run_config import RunConfig


@dataclass(frozen=True)
class UpdateResult:
    """What the client reports about its round."""

    num_examples: int  # samples trained on: the aggregation weight (the selected count)
    num_local: int  # samples the client holds
    train_loss: float
    train_seconds: float  # all the round's work except building the feature cache; the entropy pass
    #                       counts only where it selects (data-selection = entropy)
    selection_seconds: float  # the entropy pass (where it runs) and the selection
    cache_seconds: float  # one-off computation of φ(x) for the cache (0 when it was cached)
    entropy: EntropySummary | None  # where the entropy pass ran (entropy selection, or `entropy-metrics`)


@dataclass(frozen=True)
class EntropySummary:
    """Mean hardened entropy of the selected samples and of all local samples under the received model."""

    selected_mean: float
    local_mean: float


def round_seed(seed: int, server_round: int, partition_id: int) -> int:
    """A distinct, reproducible seed for each client in each round."""
    return int(np.random.SeedSequence([seed, server_round, partition_id]).generate_state(1)[0])


#: ``feature-cache-dtype`` -> how cached features are stored on the host (computation is float32 either way).
CACHE_DTYPES = {"float16": torch.float16, "float32": torch.float32}


@torch.no_grad()
def frozen_features(
    model: SplitModel, data: LocalData, level: str, batch_size: int, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """φ(x) of every local sample, φ in eval mode: computed on ``device`` a batch at a time and gathered on the
    host in ``dtype``."""
    if len(data) == 0:
        raise ValueError("this client holds no data")
    chunks = Computed(model, data, level, device).chunks(batch_size)
    return torch.cat([chunk.to("cpu", dtype) for chunk in chunks])


def local_features(
    model: SplitModel,
    data: LocalData,
    config: RunConfig,
    device: torch.device,
    cache: FeatureCache | None,
    cache_key: Hashable,
) -> tuple[Features, float]:
    """φ(x) of the local data for this round, and the seconds spent building the cache (0 when it was cached or
    is not used): from the feature cache when φ is frozen and cacheable, else computed on the device when read."""
    computed = Computed(model, data, config.freeze, device)
    if config.freeze == NO_FREEZE or cache is None or config.augment:
        return computed, 0.0
    key = (cache_key, config.feature_cache_dtype)
    cached = cache.get(key)
    if cached is not None:
        return cached, 0.0
    tick = time.perf_counter()
    built = cache.build(key, computed, config.eval_batch_size, CACHE_DTYPES[config.feature_cache_dtype])
    synchronize(device)
    return (built, time.perf_counter() - tick) if built is not None else (computed, 0.0)


@torch.no_grad()
def sample_entropies(
    model: SplitModel, features: Features, level: str, batch_size: int, device: torch.device, temperature: float
) -> torch.Tensor:
    """The entropy pass: each local sample's hardened entropy (temperature ρ) under ``model`` in eval mode, θ run on
    φ(x) a chunk at a time (stored in the cache's dtype, computed in float32)."""
    model.eval()
    logits = torch.cat([model.forward_from(chunk.to(device).float(), level) for chunk in features.chunks(batch_size)])
    return hardened_entropy(logits, temperature)


def local_update(
    model: SplitModel,
    data: LocalData,
    config: RunConfig,
    *,
    server_round: int,
    partition_id: int,
    learning_rate: float,
    device: torch.device,
    cache: FeatureCache | None = None,
    cache_key: Hashable = None,
    node_state: RecordDict | None = None,
    objective_factory: ObjectiveFactory | None = None,
) -> UpdateResult:
    """Select local samples and train θ on them for ``local-epochs`` under the configured objective; ``model`` is
    updated in place (and moved to ``device``); ``node_state`` is this node's ``context.state`` (objectives that keep
    something across rounds use it); ``objective_factory`` builds the round's objective: the one the run's
    ``objective`` names (the ClientApp hands it in from the method registry; None: the plain cross-entropy, which a
    run naming another objective refuses), or one a method composes (FedFSC adds its classifier regulariser).

    The entropy pass reads φ(x) of every sample a chunk at a time and training reads only the selected rows, which
    move to ``device`` once per round; random draws (data selection, batch order) come from a CPU generator, so
    they do not depend on the device. With ``augment``, crops change φ(x), so φ runs on every training batch.
    """
    if len(data) == 0:
        raise ValueError("this client holds no data")
    start = time.perf_counter()
    level = config.freeze
    model.to(device)
    seed = round_seed(config.seed, server_round, partition_id)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # dropout masks
    model.set_frozen(level)
    labels = data.labels.to(device)
    features, cache_seconds = local_features(model, data, config, device, cache, cache_key)

    tick = time.perf_counter()
    entropy: EntropySummary | None = None
    if config.data_selection == "entropy" or config.entropy_metrics:
        entropies = sample_entropies(model, features, level, config.eval_batch_size, device, config.temperature)
        chosen = select_samples(config.data_selection, entropies, config.selection_fraction, generator)
        entropy = EntropySummary(float(entropies[chosen].mean()), float(entropies.mean()))
    else:
        chosen = select_unscored(config.data_selection, len(data), config.selection_fraction, generator).to(device)
    synchronize(device)
    selection_seconds = time.perf_counter() - tick

    model.set_frozen(level)

    def cached_features(x: torch.Tensor) -> torch.Tensor:
        return x.float()

    def frozen_part(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model.forward_to(x, level)

    # Crops change φ(x), so with ``augment`` the round trains on images and φ runs on every batch.
    lower: Forward = frozen_part if config.augment else cached_features
    inputs = data.rows(device, chosen.cpu()) if config.augment else features.rows(chosen.cpu()).to(device)

    def forward(x: torch.Tensor) -> torch.Tensor:
        return model.forward_from(lower(x), level)

    params = model.upper_parameters(level)
    training = LocalTraining(
        model, level, params, forward, config, node_state if node_state is not None else RecordDict(), lower
    )
    if objective_factory is None and config.objective != "plain":
        raise ValueError(f"objective {config.objective!r}: pass its objective_factory (the registry's OBJECTIVES)")
    objective = (objective_factory or CrossEntropy)(training)
    theta = ThetaForward(model, level, lower)
    trained = {id(p) for p in params}
    job = ClientJob(
        theta,
        {name: p for name, p in theta.named_parameters() if id(p) in trained},
        inputs,
        labels[chosen],
        epochs=config.local_epochs,
        batch_size=config.batch_size,
        lr=learning_rate,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        generator=generator,
        augment=random_crop_flip if config.augment else None,
        client=partition_id,
    )
    done = EPOCH_TRAINER.get()(job, objective)
    settle_batchnorm(
        model, inputs, forward=forward, within=model.upper_stages(level), batch_size=config.eval_batch_size
    )
    objective.finish()
    train_seconds = time.perf_counter() - start - cache_seconds - done.waited_seconds
    if config.data_selection != "entropy":  # an entropy pass asked for by `entropy-metrics` is not the method's work
        train_seconds -= selection_seconds
    return UpdateResult(
        num_examples=len(chosen),
        num_local=len(data),
        train_loss=done.loss,
        train_seconds=train_seconds,
        selection_seconds=selection_seconds,
        cache_seconds=cache_seconds,
        entropy=entropy,
    )
