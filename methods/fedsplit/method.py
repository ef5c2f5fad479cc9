"""FedSplit's two methods: the client step, the server step and their declarations."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from flwr.app import Message, RecordDict

from methods.base import ClientStep, Method, ServerStep
from methods.common.metadata_level import MetadataLevelSettings
from methods.fedsplit.client_step import fedsplit_train
from methods.fedsplit.meta_training import MetaTraining
from methods.fedsplit.settings import (
    INIT_ROUND,
    FedSplitSettings,
    check_all_metadata,
    check_kmeans_selection,
    metadata_map_shape,
)
from methods.fedsplit.strategy import FedSplitFedAvg, MetadataPlan, composed_summary, meta_seed
from protocol.feature_metadata import MetadataLimits
from run_config import build_model_for, dataset_info
from run_config.catalogue import SettingValue
from strategies.central_evaluation import CentralEvaluation

if TYPE_CHECKING:
    from client_app.node import Node
    from models.split_model import SplitModel
    from server_app.lifecycle import FederatedRun
    from strategies.cohort_fedavg import CohortFedAvg


def client_step(kmeans: bool) -> ClientStep:
    """The client's round: metadata (K-means-selected, or all of it), then the shared local update."""

    def step(node: Node, msg: Message) -> RecordDict:
        return fedsplit_train(node, msg, kmeans=kmeans)

    return step


def server_strategy(kmeans: bool) -> ServerStep:
    """The server's step: the shared strategy, plus the metadata checks, θ_meta and the composed model."""

    def build(run: FederatedRun) -> CohortFedAvg:
        config = run.config
        settings = config.settings(FedSplitSettings)
        with torch.random.fork_rng(devices=[]):  # models initialise on the CPU generator: seed it alone
            torch.default_generator.manual_seed(meta_seed(config.seed, INIT_ROUND))
            template = build_model_for(config)

        def fresh_model() -> SplitModel:
            return copy.deepcopy(template)

        evaluation = CentralEvaluation(config, {}, run.device)
        limits = MetadataLimits(
            map_shape=metadata_map_shape(config),
            num_classes=dataset_info(config).num_classes,
            per_class=settings.k_means_clusters if kmeans else None,
            every_sample=not kmeans,
        )
        training = MetaTraining(settings.meta_epochs, settings.meta_learning_rate, settings.meta_batch_size)
        plan = MetadataPlan(
            level=config.settings(MetadataLevelSettings).metadata_level,
            limits=limits,
            training=training,
            fresh_model=fresh_model,
            evaluate=evaluation.of_state,
            device=run.device,
            seed=config.seed,
            directory=run.directory,
            every=settings.meta_every,
            last_round=config.num_server_rounds,
        )
        run.recorder.add_summary(composed_summary)
        return FedSplitFedAvg(plan=plan, **run.strategy_arguments())

    return build


#: Every run of these methods trains the whole model on all local data, as FedAvg does.
_FEDAVG_AXES: dict[str, SettingValue] = {"freeze": "none", "data-selection": "all", "selection-fraction": 1.0}

FEDSPLIT_KMEANS = Method(
    "fedsplit-kmeans",
    "FedSplit: FedAvg, plus θ above `common.metadata-level` trained on the server from scratch on the feature maps "
    "nearest each client's per-class K-means centroids; evaluated composed with the round's φ.",
    presets=_FEDAVG_AXES,
    settings=(FedSplitSettings, MetadataLevelSettings),
    client_train=client_step(kmeans=True),
    strategy=server_strategy(kmeans=True),
    check=check_kmeans_selection,
    paper="Shi thesis, Algorithm 5",
)
FEDSPLIT_ALL = Method(
    "fedsplit-all",
    "FedSplit with all metadata: every client sends the feature maps of all its samples (no selection).",
    presets=_FEDAVG_AXES,
    settings=(FedSplitSettings, MetadataLevelSettings),
    client_train=client_step(kmeans=False),
    strategy=server_strategy(kmeans=False),
    check=check_all_metadata,
    paper="Shi thesis, Table 6.3 (all meta)",
)
METHODS = (FEDSPLIT_KMEANS, FEDSPLIT_ALL)
