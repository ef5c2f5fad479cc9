"""A client's own model in a custom-size method (FedAT, FedKAD, FedMD; ``methods/common/client_models.py``): which
architecture this node trains, receiving its model, training all of it on all local data with the shared local
update (the configured objective; E epochs, or more in a first round with ``common.client-init-epochs``), and the reply
that carries its whole state."""

from __future__ import annotations

import dataclasses

from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

from client_app.local_update import UpdateResult, local_update
from client_app.node import Node
from client_app.train_step import train_metrics
from methods.common.client_models import architecture_of, build_architecture
from models import SplitModel
from protocol.messages import ARRAYS, CLIENT_MODEL_RECORD, CONFIG, METRICS, MODEL_NAME


def node_architecture(node: Node) -> str:
    """This node's architecture: its node config's ``model``, else its ``common.client-models`` entry."""
    own = node.context.node_config.get("model")
    return str(own) if own else architecture_of(node.config, node.partition_id)


def answer_client_model(node: Node, msg: Message) -> RecordDict:
    """``query.client_model``: which architecture this node trains."""
    return RecordDict({CLIENT_MODEL_RECORD: ConfigRecord({MODEL_NAME: node_architecture(node)})})


def receive_own_model(node: Node, msg: Message) -> SplitModel:
    """The node's own model from the message: its architecture (which must be the one this node trains) with the
    sent state."""
    name = str(msg.content.config_records[CONFIG][MODEL_NAME])
    if name != node_architecture(node):
        raise ValueError(f"the server sent a {name} but this node trains a {node_architecture(node)}")
    model = build_architecture(node.config, name)
    model.load_state_dict(msg.content.array_records[ARRAYS].to_torch_state_dict())
    return model


def train_own_model(node: Node, msg: Message) -> tuple[SplitModel, UpdateResult]:
    """Receive the own model and train all of it on all local data for this round's epochs (E, or more in a first
    round with ``common.client-init-epochs``) under the configured objective; the model is left on the node's device."""
    model = receive_own_model(node, msg)
    server_round, learning_rate = node.round_of(msg)
    config = dataclasses.replace(node.config, local_epochs=node.local_epochs(msg))
    result = local_update(
        model,
        node.data(),
        config,
        server_round=server_round,
        partition_id=node.partition_id,
        learning_rate=learning_rate,
        device=node.device,
        node_state=node.state,
        objective_factory=node.objective,
    )
    return model, result


def own_model_reply(node: Node, model: SplitModel, result: UpdateResult, **records: ArrayRecord) -> RecordDict:
    """The reply: the whole trained model, the round's numbers, and the method's ``records``."""
    state = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    return RecordDict({ARRAYS: ArrayRecord(state), METRICS: train_metrics(node.partition_id, result), **records})
