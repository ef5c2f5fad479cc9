"""The ClientApp: thin Flower handlers around the local data and the local update.

Messages carry θ (``arrays``) every round and φ (``frozen``) only until this node holds it; the node keeps
φ in ``context.state``, which Flower persists across rounds, and replies with θ alone.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from client_app import fault_injection
from client_app.feature_cache import PROCESS_CACHE, fingerprint
from client_app.label_counts import label_count_vector, privatise
from client_app.local_data import LocalData, load_local_data, load_node_local_data
from client_app.local_update import local_update
from client_app.threads import use_threads
from data.catalog import DATASETS
from data.federated import client_partition_labels
from data.node_data import read_node_data
from models import NO_FREEZE, SplitModel
from models.device import resolve_device
from protocol.messages import (
    ARRAYS,
    CACHE_SECONDS,
    CONFIG,
    COUNTS,
    EVAL_ACCURACY,
    EVAL_LOSS,
    FROZEN,
    IDENTIFY,
    IDENTITY,
    LABEL_COUNTS,
    LABEL_COUNTS_RECORD,
    LEARNING_RATE,
    LOCAL_ENTROPY_MEAN,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    NUM_PARTITIONS,
    PARTITION_ID,
    SELECTED_ENTROPY_MEAN,
    SELECTION_SECONDS,
    SERVER_ROUND,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
)
from models.training import evaluate as evaluate_model
from run_config import RunConfig, all_settings, build_model_for, federated_split, parse_run_config
from run_config.fail_partitions import parse_fail_partitions
from strategies.partial_model import merge_state, split_state

# A freshly initialised model computes with denormal floats for a while, about 2x slower on CPU.
torch.set_flush_denormal(True)

app = ClientApp()


#: What this node keeps about φ in ``context.state``: its fingerprint (features cached under another φ are stale).
FROZEN_INFO, FINGERPRINT = "frozen-info", "fingerprint"


class MissingFrozenPartError(RuntimeError):
    """θ arrived but this node holds no φ; the server resends φ after this error."""


@functools.lru_cache(maxsize=4)
def _parse(items: tuple) -> RunConfig:
    return parse_run_config(dict(items))


def _config(context: Context) -> RunConfig:
    """The run's configuration as this node applies it (its node-local settings included)."""
    config = _node_config(context, _parse(tuple(sorted(context.run_config.items()))))
    use_threads(config.client_threads)
    return config


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


def _device(context: Context, config: RunConfig) -> torch.device:
    """The node's ``device``; an error naming the key and what torch sees when this node lacks it."""
    where = "node config" if "device" in context.node_config else "run config"
    return resolve_device(config.device, key=f"{where} 'device'")


#: Settings that describe a node's hardware (declared with ``node=True``): a SuperNode's node config may set its own.
NODE_LOCAL_SETTINGS = tuple(s.key for s in all_settings() if s.node)


def _node_config(context: Context, config: RunConfig) -> RunConfig:
    """The run's configuration with this node's own values of the node-local settings (a small device sets a
    lower ``feature-cache-mb`` and ``eval-batch-size`` to bound its memory, a Jetson ``device = cuda``)."""
    own = {key: context.node_config[key] for key in NODE_LOCAL_SETTINGS if key in context.node_config}
    if not own:
        return config
    try:
        return parse_run_config({**config.to_dict(), **own})
    except ValueError as err:
        raise ValueError(f"node config: {err}") from None


def _local_data(context: Context, config: RunConfig) -> LocalData:
    """This node's data: its ``data-path`` folder when deployed with one, else its cut of the shared dataset."""
    if "data-path" in context.node_config:
        return load_node_local_data(str(context.node_config["data-path"]), config.dataset)
    return load_local_data(federated_split(config), *_partition(context))


def _local_labels(context: Context, config: RunConfig) -> np.ndarray:
    """This node's labels only, so answering the label-count query leaves no data in memory."""
    if "data-path" in context.node_config:
        return read_node_data(Path(str(context.node_config["data-path"])).expanduser(), config.dataset).labels
    return client_partition_labels(federated_split(config), *_partition(context))


def _load_global_model(msg: Message, context: Context, config: RunConfig) -> tuple[SplitModel, str]:
    """The full global model from the received θ and the held φ (stored first if it came along)."""
    model = build_model_for(config)
    if FROZEN in msg.content:
        frozen = msg.content[FROZEN]
        context.state[FROZEN] = frozen
        context.state[FROZEN_INFO] = ConfigRecord({FINGERPRINT: fingerprint(frozen.to_torch_state_dict())})
    trained = msg.content[ARRAYS].to_torch_state_dict()
    if config.freeze == NO_FREEZE:
        model.load_state_dict(trained)
        return model, ""
    if FROZEN not in context.state:
        raise MissingFrozenPartError("this node holds no frozen part φ; it will be sent with the next request")
    frozen = context.state[FROZEN].to_torch_state_dict()
    model.load_state_dict(merge_state(frozen, trained, model.state_dict().keys()))
    return model, str(context.state[FROZEN_INFO][FINGERPRINT])


@app.query(IDENTIFY.removeprefix("query."))
def identify(msg: Message, context: Context) -> Message:
    """Tell the server which partition this node holds (node ids are not stable, partition ids are) and how many
    samples it holds (what the server checks every later reply's counts against)."""
    partition_id, num_partitions = _partition(context)
    num_examples = len(_local_labels(context, _config(context)))
    identity = MetricRecord({PARTITION_ID: partition_id, NUM_PARTITIONS: num_partitions, NUM_EXAMPLES: num_examples})
    return Message(RecordDict({IDENTITY: identity}), reply_to=msg)


@app.query(LABEL_COUNTS.removeprefix("query."))
def label_counts(msg: Message, context: Context) -> Message:
    """Send this client's label counts (FedEntOpt), with Laplace noise when ``label-dp-epsilon`` > 0: one release
    per run, repeated if asked again (see client_app/label_counts.py)."""
    if LABEL_COUNTS_RECORD not in context.state:
        config = _config(context)
        labels = _local_labels(context, config)
        counts = privatise(label_count_vector(labels, DATASETS[config.dataset].num_classes), config.label_dp_epsilon)
        context.state[LABEL_COUNTS_RECORD] = ConfigRecord({COUNTS: counts.tolist()})
    return Message(RecordDict({LABEL_COUNTS_RECORD: context.state[LABEL_COUNTS_RECORD]}), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Select local data, train θ, send θ back with the round's statistics."""
    config = _config(context)
    partition_id, num_partitions = _partition(context)
    fault = parse_fail_partitions(config.fail_partitions).get(partition_id)
    fault_injection.before_training(fault, config.round_timeout)
    device = _device(context, config)
    data = fault_injection.training_data(_local_data(context, config), fault, DATASETS[config.dataset].num_classes)
    model, phi_fingerprint = _load_global_model(msg, context, config)
    round_config = msg.content[CONFIG]
    cache_dir = Path(config.feature_cache_dir).expanduser() if config.feature_cache_dir else None
    PROCESS_CACHE.configure(config.feature_cache_mb * 2**20, cache_dir)
    result = local_update(
        model,
        data,
        config,
        server_round=int(round_config[SERVER_ROUND]),
        partition_id=partition_id,
        learning_rate=float(round_config[LEARNING_RATE]),
        cache=PROCESS_CACHE if config.feature_cache else None,
        device=device,
        cache_key=(federated_split(config), partition_id, num_partitions, str(context.node_config.get("data-path", "")),
                   config.freeze, phi_fingerprint),
    )
    _, trained = split_state({k: v.cpu() for k, v in model.state_dict().items()}, model.upper_state_keys(config.freeze))
    metrics = MetricRecord(
        {
            PARTITION_ID: partition_id,
            NUM_EXAMPLES: result.num_examples,
            NUM_LOCAL: result.num_local,
            TRAIN_LOSS: result.train_loss,
            TRAIN_SECONDS: result.train_seconds,
            SELECTION_SECONDS: result.selection_seconds,
            CACHE_SECONDS: result.cache_seconds,
            SELECTED_ENTROPY_MEAN: result.selected_entropy_mean,
            LOCAL_ENTROPY_MEAN: result.local_entropy_mean,
            THREADS: torch.get_num_threads(),
        }
    )
    trained, metrics = fault_injection.tamper(fault, trained, msg.content[ARRAYS], metrics,
                                              (config.seed, int(round_config[SERVER_ROUND]), partition_id))
    return Message(RecordDict({ARRAYS: ArrayRecord(trained), METRICS: metrics}), reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received global model on this client's local data."""
    config = _config(context)
    data = _local_data(context, config)
    model, _ = _load_global_model(msg, context, config)
    device = _device(context, config)
    model.to(device).eval()
    loss, accuracy = evaluate_model(model, data.inputs(device), data.labels.to(device), config.eval_batch_size)
    metrics = MetricRecord({EVAL_LOSS: loss, EVAL_ACCURACY: accuracy, NUM_EXAMPLES: len(data)})
    return Message(RecordDict({METRICS: metrics}), reply_to=msg)
