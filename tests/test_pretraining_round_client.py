"""A client's part of the pretraining round (client_app/pretraining_round.py): the convergence rule, training the whole
model until it holds, and the reply."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

import client_app.app as client
from client_app.pretraining_round import keeps_improving, train_until_converged
from models import build_model
from protocol.messages import (
    ARRAYS,
    CONFIG,
    EPOCHS,
    LEARNING_RATE,
    MAX_EPOCHS,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PRETRAINING_ROUND,
    SERVER_ROUND,
    TOLERANCE,
    TRAIN,
    TRAIN_LOSS,
)
from tests.in_process import small_run_config


@pytest.mark.parametrize(
    ("losses", "tolerance", "again"),
    [
        ([], 0.01, True),  # nothing trained yet
        ([2.0], 0.01, True),  # one epoch: nothing to compare with
        ([2.0, 1.5], 0.01, True),  # fell by 0.5
        ([2.0, 1.995], 0.01, False),  # fell by less than the tolerance
        ([2.0, 1.99], 0.01, True),  # fell by exactly the tolerance
        ([2.0, 1.0, 1.2], 0.01, False),  # rose
        ([2.0, 1.0, 1.2, 0.5], 0.01, True),  # compared with the lowest before it, 1.0
        ([2.0, 1.0, 0.995], 0.01, False),
        ([2.0, math.nan], 0.01, False),  # a loss that is not a number ends it
        ([math.inf], 0.01, False),
    ],
)
def test_another_epoch_while_the_loss_falls_by_the_tolerance(losses, tolerance, again):
    assert keeps_improving(losses, tolerance) is again


def _task(samples: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(samples, 1, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    return inputs, labels


def _train(tolerance: float, max_epochs: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[float]]:
    torch.manual_seed(0)
    model = build_model("lenet5", in_channels=1, num_classes=10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    inputs, labels = _task()
    losses = train_until_converged(
        model,
        inputs,
        labels,
        tolerance=tolerance,
        max_epochs=max_epochs,
        batch_size=32,
        learning_rate=0.05,
        momentum=0.5,
        weight_decay=0.0,
        generator=torch.Generator().manual_seed(1),
    )
    return before, model.state_dict(), losses


def test_a_loss_that_falls_trains_to_the_cap():
    """Random labels on 96 images: LeNet-5 memorises them, its loss falling by more than a tiny tolerance each epoch."""
    _, _, losses = _train(tolerance=1e-6, max_epochs=4)
    assert len(losses) == 4 and losses[-1] < losses[0]


def test_a_loss_that_cannot_fall_by_the_tolerance_stops_after_two_epochs():
    _, _, losses = _train(tolerance=100.0, max_epochs=20)
    assert len(losses) == 2


def test_one_epoch_at_most_with_a_cap_of_one():
    _, _, losses = _train(tolerance=1e-6, max_epochs=1)
    assert len(losses) == 1


def test_every_parameter_is_trained_the_stem_included():
    before, after, _ = _train(tolerance=1e-6, max_epochs=2)
    model = build_model("lenet5", in_channels=1, num_classes=10)
    for name, _ in model.named_parameters():
        assert not torch.equal(before[name], after[name]), f"{name} was not trained"


def _phase_message(arrays: dict[str, torch.Tensor], max_epochs: int) -> Message:
    config = ConfigRecord(
        {SERVER_ROUND: 0, LEARNING_RATE: 0.05, PRETRAINING_ROUND: True, TOLERANCE: 1e-6, MAX_EPOCHS: max_epochs}
    )
    content = RecordDict({ARRAYS: ArrayRecord(arrays), CONFIG: config})
    return Message(content=content, message_type=TRAIN, dst_node_id=101)


def test_the_client_replies_with_the_whole_model_trained_on_all_its_data(tmp_path: Path):
    """A FedFT-EDS node (φ frozen in its rounds) answers the pretraining round with every array of the model, trained,
    all its samples as the weight and the epochs it ran; it needs no φ sent before."""
    run_config = small_run_config(tmp_path)
    context = Context(
        run_id=1,
        node_id=101,
        node_config={"partition-id": 0, "num-partitions": 4},
        state=RecordDict(),
        run_config=run_config,
    )
    torch.manual_seed(0)
    start = build_model("lenet5", in_channels=1, num_classes=4).state_dict()
    reply = client.HANDLERS[TRAIN](_phase_message(start, max_epochs=3), context)
    assert not reply.has_error(), reply.error.reason if reply.has_error() else ""
    metrics = reply.content.metric_records[METRICS]
    arrays = reply.content.array_records[ARRAYS].to_torch_state_dict()
    assert list(arrays) == list(start)
    assert all(not torch.equal(arrays[k], start[k]) for k in start if k.endswith("weight"))
    assert metrics[EPOCHS] == 3
    assert metrics[NUM_EXAMPLES] == metrics[NUM_LOCAL] > 0
    assert metrics[TRAIN_LOSS] >= 0
