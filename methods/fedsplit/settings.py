"""FedSplit with K-means feature-map selection (Shi thesis §6.2-6.3, Algorithm 5).

Each round t, every client k
1. receives w_g^t = {φ_g^t, θ_g^t} and, with it in eval mode and *before* training, computes the feature maps of
   all its samples at ``common.metadata-level`` l (``low``, ``mid``, ``up``: the model's split levels; eq. 6.3);
2. selects metadata (eq. 6.4; ``methods/fedsplit/kmeans_selection.py``): flattens the maps, projects them with PCA
   (fitted on all its maps) to ``fedsplit.n-com`` dimensions, runs K-means with ``fedsplit.k-means-clusters`` clusters
   on each class apart, and keeps the real sample nearest each centroid, as its original (unprojected) map with its
   label; a class with no more samples than clusters keeps all of them. ``fedsplit-all`` keeps every map (the thesis's
   "all metadata");
3. trains the whole model as FedAvg does (the shared local update, ``local-epochs`` of SGD on all its data);
4. replies with w_k^{t+1} and the metadata (``feature-metadata``; ``protocol/messages.py``), plus
   ``metadata-seconds``, the time steps 1-2 took (apart from ``train-seconds``).

The server (``methods/fedsplit/strategy.py``) refuses replies whose metadata is unsound
(``protocol/feature_metadata.py``), FedAvg's the accepted models into w_g^{t+1} (what the next round distributes;
rounds.jsonl's ``accuracy``), trains θ (the stages above l) from the same fresh initialisation θ_g^ini every round on
the union of the metadata for ``fedsplit.meta-epochs`` of plain SGD (``fedsplit.meta-learning-rate``,
``fedsplit.meta-batch-size``; eq. 6.5; ``methods/fedsplit/meta_training.py``), and evaluates the composed model
{θ_meta^t, φ_g^t} (``composed_accuracy``), in every round or, to save server time, every ``fedsplit.meta-every``-th
round and the last. The metadata's bytes count in ``bytes_up``.

Decisions where the thesis is silent: PCA per client over all its maps, K-means++
seeding drawn from (seed, round, partition); meta-training batch 50 (the thesis's local batch), no momentum or
weight decay ("SGD with a learning rate of 0.1"); θ_g^ini drawn once per run from the seed. Settings that cannot
fit the model (a level it lacks, ``fedsplit.n-com`` above the flattened map size at that level) stop the run at start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from methods.common.metadata_level import MetadataLevelSettings
from methods.fedsplit.kmeans_selection import LEVEL_KEY, N_COM_KEY
from models.outputs import feature_map_shapes
from run_config import ConfigError, RunConfig, build_model_for, dataset_info
from run_config.settings import positive, setting

if TYPE_CHECKING:
    pass

#: The seed stream θ_g^ini is drawn from (round 0 of the meta-training seeds: no round uses it for batches).
INIT_ROUND = 0


#: The split levels of the app's models; the configured model must have the one chosen (checked at start).
LEVELS = ("low", "mid", "up")


@dataclass(frozen=True)
class FedSplitSettings:
    NAMESPACE: ClassVar[str] = "fedsplit"

    n_com: int = setting(
        200,
        "FedSplit K-means: PCA components before clustering (at most the map size at `common.metadata-level`).",
        positive,
    )
    k_means_clusters: int = setting(
        20,
        "FedSplit K-means: clusters per class; the sample nearest each centroid is sent (a class with no more "
        "samples than clusters sends all).",
        positive,
    )
    meta_epochs: int = setting(100, "FedSplit: epochs of the server's training of θ from scratch each round.", positive)
    meta_learning_rate: float = setting(
        0.1, "FedSplit: SGD learning rate of the server's metadata training (no momentum or weight decay).", positive
    )
    meta_batch_size: int = setting(50, "FedSplit: mini-batch size of the server's metadata training.", positive)
    meta_every: int = setting(
        1,
        "FedSplit: the server trains θ on the metadata and evaluates the composed model every n-th round and in the "
        "last (1: every round, as the thesis; more saves server time, clients are unchanged).",
        positive,
    )


def metadata_map_shape(config: RunConfig) -> tuple[int, ...]:
    """The per-sample shape of the configured model's feature maps at ``common.metadata-level``; ``ConfigError`` naming
    the key when the model has no such level. The model is built on the meta device: shapes only, no weights drawn, so
    torch's global generator, which another thread may be drawing a seeded model from, is left alone (saving and
    restoring it, as ``fork_rng`` does, is not safe across threads)."""
    level = config.settings(MetadataLevelSettings).metadata_level
    with torch.device("meta"):
        model = build_model_for(config)
    if level not in model.levels:
        raise ConfigError(
            f"run config '{LEVEL_KEY}' = {level!r} is invalid: {config.model} splits at {', '.join(model.levels)}"
        )
    return feature_map_shapes(model, dataset_info(config).input_shape, [level])[level]


def check_all_metadata(config: RunConfig, client_sizes: Mapping[int, int] | None = None) -> None:
    """``fedsplit-all``: the metadata level must be one of the model's (the clients' sizes play no part)."""
    metadata_map_shape(config)


def check_kmeans_selection(config: RunConfig, client_sizes: Mapping[int, int] | None = None) -> None:
    """``fedsplit-kmeans``: the level must be the model's, and ``fedsplit.n-com`` at most the flattened map size there.
    More clusters than a class has samples is no error: that class sends all its samples."""
    size = math.prod(metadata_map_shape(config))
    settings = config.settings(FedSplitSettings)
    if settings.n_com > size:
        raise ConfigError(
            f"run config '{N_COM_KEY}' = {settings.n_com} is invalid: it is larger than the {size} values of a "
            f"{config.model} feature map at {LEVEL_KEY} {config.settings(MetadataLevelSettings).metadata_level!r}; "
            f"choose at most {size}"
        )
