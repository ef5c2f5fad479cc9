"""The faults and attacks ``fail-partitions`` injects into a client's training round (testing only), as a Flower
mod around the ClientApp's ``train`` handler (``inject_faults``): the training steps know nothing of them.

A fault acts before the handler (``raise``, ``hang``, ``die``), on the node's data (``labelflip``: the mod sets the
node-config switch ``POISONED_LABELS``, which the node reads when it loads its data), or on the reply (the attacks).

Attacks on the update use the θ the client received: Δ = θ_trained − θ_sent is computable client-side, so
a hostile client can send θ_sent + c·Δ for any c, or anything else of the right names, shapes and dtypes.
Only floating-point arrays are attacked; integer buffers (BatchNorm's ``num_batches_tracked``) are sent as
trained.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord
from flwr.clientapp.typing import ClientAppCallable

from client_app.local_data import LocalData
from protocol.messages import ARRAYS, CONFIG, METRICS, NUM_EXAMPLES, SERVER_ROUND
from run_config.fail_partitions import parse_fail_partitions

#: The node-config switch of a data-poisoning node: it trains on label C − 1 − y (``labelflip``).
POISONED_LABELS = "poisoned-labels"

#: A hanging client answers this long after the server stopped waiting; its late reply is dropped. The server's wait
#: starts before the client's sleep does, so any positive margin makes the reply late; a second keeps the hang short
#: where it holds up others (the in-process engine answers one message at a time; a Ray actor queues the next one).
HANG_PAST_TIMEOUT_SECONDS = 1.0
#: Update multipliers of the scaling attacks: θ_sent + c·Δ
UPDATE_SCALES = {"scale100": 100.0, "signflip10": -10.0, "inflate": -1.0}
HUGE_VALUE = 1e20
INFLATE_FACTOR = 1000

State = dict[str, torch.Tensor]


class InjectedFault(RuntimeError):
    """Raised by a client told to fail with ``fail-partitions``."""


def before_training(mode: str | None, round_timeout: float) -> None:
    """``raise`` raises; ``hang`` sleeps past the round timeout; ``die`` kills this process with SIGKILL (as the
    kernel's OOM killer does); anything else does nothing."""
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "raise":
        raise InjectedFault("fail-partitions: this client is set to raise")
    if mode == "hang":
        time.sleep(round_timeout + HANG_PAST_TIMEOUT_SECONDS)


def flipped_labels(data: LocalData, num_classes: int) -> LocalData:
    """``data`` with label C − 1 − y (a data-poisoning client's)."""
    return LocalData(data.images, num_classes - 1 - data.labels, data.info)


def attacked_state(
    trained: Mapping[str, torch.Tensor], sent: Mapping[str, torch.Tensor], mode: str | None, generator: torch.Generator
) -> State:
    """The θ a client told to attack sends instead of ``trained`` (``sent`` is the θ it received).

    ``garbage``: NaN everywhere; ``scale100`` / ``signflip10`` / ``inflate``: θ_sent + c·Δ with c = 100, −10,
    −1; ``huge``: 1e20 everywhere; ``gaussian``: θ_sent + a standard-normal direction (drawn from the CPU
    ``generator``) scaled to ‖Δ‖₂ over all floating-point arrays together. Other modes return ``trained``.
    """
    floats = [key for key, value in trained.items() if value.is_floating_point()]
    attacked = dict(trained)
    if mode == "garbage":
        attacked.update({key: torch.full_like(trained[key], float("nan")) for key in floats})
    elif mode == "huge":
        attacked.update({key: torch.full_like(trained[key], HUGE_VALUE) for key in floats})
    elif mode in UPDATE_SCALES:
        scale = UPDATE_SCALES[mode]
        attacked.update({key: sent[key] + scale * (trained[key] - sent[key]) for key in floats})
    elif mode == "gaussian":
        update = torch.cat([(trained[key] - sent[key]).double().flatten() for key in floats])
        noise = torch.randn(update.numel(), generator=generator, dtype=torch.float64)
        noise *= update.norm() / noise.norm()
        pieces = noise.split([trained[key].numel() for key in floats])
        attacked.update(
            {key: sent[key] + piece.reshape(sent[key].shape).to(sent[key].dtype) for key, piece in zip(floats, pieces)}
        )
    return attacked


def reported_examples(num_examples: int, mode: str | None) -> int:
    """``inflate`` claims ×1000 the samples trained on, to weigh ×1000 in FedAvg's mean."""
    return num_examples * INFLATE_FACTOR if mode == "inflate" else num_examples


def tamper(
    mode: str | None, trained: State, sent: ArrayRecord, metrics: MetricRecord, seed: Sequence[int]
) -> tuple[State, MetricRecord]:
    """The reply's θ and metrics as a client told to attack sends them (unchanged for honest clients).

    ``seed`` (run seed, round, partition) seeds ``gaussian``'s direction reproducibly.
    """
    if mode is None or mode in ("raise", "hang", "die", "labelflip"):
        return trained, metrics
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence(list(seed)).generate_state(1)[0]))
    state = attacked_state(trained, sent.to_torch_state_dict(), mode, generator)
    reported = MetricRecord(dict(metrics))
    reported[NUM_EXAMPLES] = reported_examples(cast(int, metrics[NUM_EXAMPLES]), mode)
    return state, reported


def node_fault(context: Context) -> str | None:
    """The fault ``fail-partitions`` names for this node's partition, or None."""
    faults = parse_fail_partitions(str(context.run_config.get("fail-partitions", "")))
    return faults.get(int(context.node_config["partition-id"]))


def inject_faults(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """A Flower mod for the ``train`` handler: the fault ``fail-partitions`` names for this node, if any."""
    mode = node_fault(context)
    if mode is None:
        return call_next(msg, context)
    before_training(mode, float(context.run_config["round-timeout"]))
    if mode == "labelflip":
        context.node_config[POISONED_LABELS] = True
    reply = call_next(msg, context)
    if reply.has_error() or ARRAYS not in reply.content.array_records:
        return reply
    server_round = cast(int, msg.content.config_records[CONFIG][SERVER_ROUND])
    seed = (int(context.run_config["seed"]), server_round, int(context.node_config["partition-id"]))
    trained = reply.content.array_records[ARRAYS].to_torch_state_dict()
    metrics = reply.content.metric_records[METRICS]
    state, metrics = tamper(mode, trained, msg.content.array_records[ARRAYS], metrics, seed)
    reply.content[ARRAYS], reply.content[METRICS] = ArrayRecord(state), metrics
    return reply
