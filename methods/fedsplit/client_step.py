"""FedSplit's client step (thesis Alg. 5, lines 6-9; ``methods/fedsplit/method.py``): feature maps of all local samples
at ``common.metadata-level`` under the *received* global model, the metadata chosen among them (K-means selection, or
all), then the shared local update of the whole model; the reply is the shared one plus the metadata."""

from __future__ import annotations

import time

import torch
from flwr.app import ArrayRecord, Message, RecordDict

from client_app.local_data import LocalData
from client_app.local_update import round_seed
from client_app.node import Node
from client_app.train_step import shared_train
from methods.common.metadata_level import MetadataLevelSettings
from methods.fedsplit.kmeans_selection import feature_maps_at, select_metadata
from methods.fedsplit.settings import FedSplitSettings
from models.split_model import SplitModel
from protocol.messages import FEATURE_MAPS, FEATURE_METADATA, MAP_LABELS, METADATA_SECONDS, METRICS
from run_config import RunConfig


def client_metadata(
    model: SplitModel, data: LocalData, config: RunConfig, *, kmeans: bool, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """D_k,meta^t: the original feature maps at the metadata level and their labels, of the samples K-means selects
    (``seed`` seeds its draws) or of every sample. ``model`` is the received one; it moves to ``device``, its mode
    is kept."""
    settings = config.settings(FedSplitSettings)
    model.to(device)
    maps = feature_maps_at(
        model, data.inputs(device), config.settings(MetadataLevelSettings).metadata_level, config.eval_batch_size
    )
    labels = data.labels.to(device)
    if not kmeans:
        return maps, labels
    selection = select_metadata(maps, labels, n_com=settings.n_com, clusters=settings.k_means_clusters, seed=seed)
    return selection.feature_maps, selection.labels


def metadata_record(feature_maps: torch.Tensor, labels: torch.Tensor) -> ArrayRecord:
    """The ``feature-metadata`` record: float32 maps and int64 labels, on the host."""
    return ArrayRecord(
        {
            FEATURE_MAPS: feature_maps.detach().to("cpu", torch.float32).contiguous(),
            MAP_LABELS: labels.to("cpu", torch.int64).contiguous(),
        }
    )


def fedsplit_train(node: Node, msg: Message, *, kmeans: bool) -> RecordDict:
    """Metadata from the received model, then the shared round (whole model, all local data); one reply."""
    tick = time.perf_counter()
    model, _ = node.global_model(msg)
    server_round, _ = node.round_of(msg)
    seed = round_seed(node.config.seed, server_round, node.partition_id)
    maps, labels = client_metadata(model, node.data(), node.config, kmeans=kmeans, seed=seed, device=node.device)
    record = metadata_record(maps, labels)
    seconds = time.perf_counter() - tick
    reply = shared_train(node, msg)
    reply.metric_records[METRICS][METADATA_SECONDS] = seconds
    reply[FEATURE_METADATA] = record
    return reply
