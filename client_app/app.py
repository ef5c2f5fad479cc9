"""The ClientApp: thin Flower handlers around the local data and the local update."""

from __future__ import annotations

import functools

import torch

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from client_app.local_data import load_local_data
from client_app.local_update import local_update
from models.training import evaluate as evaluate_model
from run_config import RunConfig, build_model_for, federated_split, parse_run_config

# A freshly initialised model computes with denormal floats for a while, about 2x slower on CPU.
torch.set_flush_denormal(True)

app = ClientApp()


@functools.lru_cache(maxsize=4)
def _parse(items: tuple) -> RunConfig:
    return parse_run_config(dict(items))


def _config(context: Context) -> RunConfig:
    return _parse(tuple(sorted(context.run_config.items())))


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


@app.query("identify")
def identify(msg: Message, context: Context) -> Message:
    """Tell the server which partition this node holds (node ids are not stable, partition ids are)."""
    partition_id, num_partitions = _partition(context)
    identity = MetricRecord({"partition-id": partition_id, "num-partitions": num_partitions})
    return Message(RecordDict({"identity": identity}), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Load the received model, train it locally, send it back with the round's statistics."""
    config = _config(context)
    partition_id, num_partitions = _partition(context)
    data = load_local_data(federated_split(config), partition_id, num_partitions)
    model = build_model_for(config)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    round_config = msg.content["config"]
    result = local_update(
        model,
        data,
        config,
        server_round=int(round_config["server-round"]),
        partition_id=partition_id,
        learning_rate=float(round_config["learning-rate"]),
    )
    metrics = MetricRecord(
        {
            "partition-id": partition_id,
            "num-examples": result.num_examples,
            "num-local": result.num_local,
            "train-loss": result.train_loss,
            "train-seconds": result.train_seconds,
        }
    )
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received model on this client's local data."""
    config = _config(context)
    partition_id, num_partitions = _partition(context)
    data = load_local_data(federated_split(config), partition_id, num_partitions)
    model = build_model_for(config)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.eval()
    loss, accuracy = evaluate_model(model, data.inputs, data.labels, config.eval_batch_size)
    metrics = MetricRecord({"eval-loss": loss, "eval-acc": accuracy, "num-examples": len(data)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
