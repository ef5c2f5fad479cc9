"""The ClientApp: thin Flower handlers; each reads its node (``client_app/node.py``) and replies as the protocol
declares (``protocol/messages.py``). Training goes to the method's client step, by default the shared one
(``client_app/train_step.py``).

Messages carry θ (``arrays``) every round and φ (``frozen``) only until this node holds it; the node keeps φ in
``context.state``, which Flower persists across rounds, and replies with θ alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.client.mod.utils import make_ffn
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable, Mod

from client_app.fault_injection import inject_faults
from client_app.label_counts import label_count_vector, privatise
from client_app.node import Node
from client_app.pretraining_round import is_pretraining_round, pretraining_round_train
from client_app.train_step import shared_train
from methods.registry import CATALOGUE, OBJECTIVES, QUERIES, method
from models.training import evaluate as evaluate_model
from profiling.spans import CLIENT_MESSAGE, span
from protocol.messages import (
    CONFIG,
    COUNTS,
    EVAL_ACCURACY,
    EVAL_LOSS,
    EVALUATE,
    IDENTIFY,
    IDENTITY,
    LABEL_COUNTS,
    LABEL_COUNTS_RECORD,
    METRICS,
    NUM_EXAMPLES,
    NUM_PARTITIONS,
    PARTITION_ID,
    SERVER_ROUND,
    TRAIN,
    WITH_LABEL_COUNTS,
)

torch.set_flush_denormal(True)  # a freshly initialised model computes with denormal floats, about 2x slower on CPU

app = ClientApp()


def node_of(context: Context) -> Node:
    """The node a message finds, with the registry's methods and objectives."""
    return Node(context, CATALOGUE, OBJECTIVES)


def released_label_counts(node: Node) -> ConfigRecord:
    """This client's label counts as it releases them, with Laplace noise when ``label-dp-epsilon`` > 0: one release
    per run, repeated if asked again (kept in ``context.state``; see client_app/label_counts.py)."""
    if LABEL_COUNTS_RECORD not in node.state:
        vector = label_count_vector(node.labels(), node.info.num_classes)
        counts = privatise(vector, node.config.label_dp_epsilon)
        node.state[LABEL_COUNTS_RECORD] = ConfigRecord({COUNTS: counts.tolist()})
    return node.state.config_records[LABEL_COUNTS_RECORD]


@app.query(IDENTIFY.removeprefix("query."))
def identify(msg: Message, context: Context) -> Message:
    """Tell the server which partition this node holds (node ids are not stable, partition ids are) and how many
    samples it holds (what the server checks every later reply's counts against); with the label counts when the
    server asks for them along."""
    with span(CLIENT_MESSAGE, type=IDENTIFY):
        node = node_of(context)
        identity = MetricRecord(
            {PARTITION_ID: node.partition_id, NUM_PARTITIONS: node.num_partitions, NUM_EXAMPLES: len(node.labels())}
        )
        reply = RecordDict({IDENTITY: identity})
        if CONFIG in msg.content.config_records and msg.content.config_records[CONFIG].get(WITH_LABEL_COUNTS):
            reply[LABEL_COUNTS_RECORD] = released_label_counts(node)
        return Message(reply, reply_to=msg)


@app.query(LABEL_COUNTS.removeprefix("query."))
def label_counts(msg: Message, context: Context) -> Message:
    """Send this client's label counts (FedEntOpt); see ``released_label_counts``."""
    with span(CLIENT_MESSAGE, type=LABEL_COUNTS):
        return Message(RecordDict({LABEL_COUNTS_RECORD: released_label_counts(node_of(context))}), reply_to=msg)


#: The mods around ``train``: the faults ``fail-partitions`` injects (testing only), outside every training step.
TRAIN_MODS: list[Mod] = [inject_faults]


@app.train(mods=TRAIN_MODS)
def train(msg: Message, context: Context) -> Message:
    """The round's local work, by the configured method's client step (the pretraining round's, when the message
    asks for it: client_app/pretraining_round.py)."""
    with span(CLIENT_MESSAGE, type=TRAIN, round=msg.content[CONFIG][SERVER_ROUND]):
        node = node_of(context)
        if is_pretraining_round(msg):
            return Message(pretraining_round_train(node, msg), reply_to=msg)
        step = method(node.config.method).client_train or shared_train
        return Message(step(node, msg), reply_to=msg)


def method_query(answer: Callable[[Node, Message], RecordDict]) -> Callable[[Message, Context], Message]:
    """A handler for a query a method declares (``Method.queries``)."""

    def handle(msg: Message, context: Context) -> Message:
        with span(CLIENT_MESSAGE, type=msg.metadata.message_type):
            return Message(answer(node_of(context), msg), reply_to=msg)

    return handle


for _message_type, _answer in QUERIES.items():
    app.query(_message_type.removeprefix("query."))(method_query(_answer))


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received global model on this client's local data."""
    with span(CLIENT_MESSAGE, type=EVALUATE):
        node = node_of(context)
        data = node.data()
        model, _ = node.global_model(msg)
        model.to(node.device).eval()
        loss, accuracy = evaluate_model(
            model, data.inputs(node.device), data.labels.to(node.device), node.config.eval_batch_size
        )
        metrics = MetricRecord({EVAL_LOSS: loss, EVAL_ACCURACY: accuracy, NUM_EXAMPLES: len(data)})
        return Message(RecordDict({METRICS: metrics}), reply_to=msg)


#: Every handler as Flower runs it (with its mods), by message type: the in-process runners answer with these.
HANDLERS: dict[str, ClientAppCallable] = {
    IDENTIFY: identify,
    LABEL_COUNTS: label_counts,
    TRAIN: make_ffn(train, TRAIN_MODS),
    EVALUATE: evaluate,
    **{message_type: method_query(answer) for message_type, answer in QUERIES.items()},
}
