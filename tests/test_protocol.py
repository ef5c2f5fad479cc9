"""The protocol's boundary: each rule of each reply type, broken by one reply, is refused with its reason; sound
replies pass; nothing a reply holds can raise past ``refusal``."""

from __future__ import annotations

import math

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from protocol.messages import EVALUATE_METRICS, IDENTITY_FIELDS, MAX_SECONDS, TRAIN_METRICS
from protocol.replies import (
    Identity,
    array_specs,
    read_evaluate_reply,
    read_identity,
    read_label_counts,
    read_train_reply,
    refusal,
)
from tests.fake_grid import train_metrics

HOLDER = Identity(partition_id=2, num_partitions=4, num_examples=50)


def refused(read, *args, **kwargs) -> str | None:
    return refusal(read, *args, **kwargs)[1]


# --- identify ---------------------------------------------------------------------------------------------------


def identity(**numbers) -> RecordDict:
    return RecordDict(
        {"identity": MetricRecord({"partition-id": 2, "num-partitions": 4, "num-examples": 50, **numbers})}
    )


def test_a_sound_identity_is_read() -> None:
    assert read_identity(identity()) == HOLDER
    assert {f.key for f in IDENTITY_FIELDS} == {"partition-id", "num-partitions", "num-examples"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (RecordDict({}), "missing record identity"),
        (
            RecordDict({"identity": ConfigRecord({"partition-id": 2})}),
            "record 'identity' is a ConfigRecord, expected a MetricRecord",
        ),
        (
            RecordDict(
                {
                    "identity": MetricRecord({"partition-id": 1, "num-partitions": 4, "num-examples": 5}),
                    "other": MetricRecord({}),
                }
            ),
            "unexpected record other",
        ),
        (
            RecordDict({"identity": MetricRecord({"partition-id": 1, "num-partitions": 4})}),
            "identity lacks num-examples",
        ),
        (identity(extra=1), "identity has unexpected extra"),
        (identity(**{"partition-id": 2.0}), "'partition-id' must be an integer, got 2.0"),
        (identity(**{"partition-id": -1}), "'partition-id' = -1 is outside [0, inf]"),
        (identity(**{"num-partitions": 0}), "'num-partitions' = 0 is outside [1, inf]"),
        (identity(**{"partition-id": 4}), "partition-id 4 is not below num-partitions 4"),
        (identity(**{"num-examples": 0}), "'num-examples' = 0 is outside [1, inf]"),
    ],
)
def test_bad_identities_are_refused(content: RecordDict, reason: str) -> None:
    assert refused(read_identity, content) == reason


# --- label counts -------------------------------------------------------------------------------------------------


def counts(values, **extra) -> RecordDict:
    return RecordDict({"label-counts": ConfigRecord({"counts": values, **extra})})


def test_sound_counts_are_read_with_and_without_noise() -> None:
    assert read_label_counts(counts([20, 30, 0]), 3, HOLDER, noisy=False).tolist() == [20.0, 30.0, 0.0]
    assert read_label_counts(counts([21, 33, 1]), 3, HOLDER, noisy=True).tolist() == [21.0, 33.0, 1.0]


@pytest.mark.parametrize(
    ("content", "noisy", "reason"),
    [
        (counts([20, 30]), False, "2 label counts for 3 labels"),
        (counts([60, -10, 0]), False, "label counts must be whole numbers >= 0"),
        (counts([20.0, 29.5, 0.5]), False, "label counts must be whole numbers >= 0"),
        (counts([20.0, math.inf, 0.0]), True, "label counts must be whole numbers >= 0"),
        (counts("20 30 0"), False, "label counts are not a list of numbers"),
        (counts([True, False, True]), False, "label counts are not a list of numbers"),
        (counts([20, 30, 0], extra=1), False, "label counts must hold only 'counts', got counts, extra"),
        (counts([20, 30, 1]), False, "label counts add up to 51, but the client said it holds 50 samples"),
        (
            RecordDict({"label-counts": MetricRecord({"counts": [1]})}),
            False,
            "record 'label-counts' is a MetricRecord, expected a ConfigRecord",
        ),
    ],
)
def test_bad_counts_are_refused(content: RecordDict, noisy: bool, reason: str) -> None:
    assert refused(read_label_counts, content, 3, HOLDER, noisy) == reason


# --- train --------------------------------------------------------------------------------------------------------

SENT = ArrayRecord(
    {"fc.weight": torch.zeros(3, 2), "fc.bias": torch.zeros(3), "bn.num_batches_tracked": torch.tensor(4)}
)
EXPECTED = array_specs(SENT)


def train(arrays: dict | None = None, metrics: dict | None = None, **records) -> RecordDict:
    arrays = arrays if arrays is not None else {k: v.clone() for k, v in SENT.to_torch_state_dict().items()}
    metrics = metrics if metrics is not None else train_metrics(2, 5, 50)
    return RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord(metrics), **records})


def changed(key: str, value) -> dict:
    return {**SENT.to_torch_state_dict(), key: value}


def without(key: str) -> dict:
    return {k: v for k, v in SENT.to_torch_state_dict().items() if k != key}


def test_a_sound_training_reply_is_read() -> None:
    assert read_train_reply(train(), EXPECTED, HOLDER, expected_examples=5)["num-examples"] == 5


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (RecordDict({"metrics": MetricRecord(train_metrics(2, 5, 50))}), "missing record arrays"),
        (RecordDict({"arrays": SENT}), "missing record metrics"),
        (train(other=ArrayRecord({"x": torch.zeros(1)})), "unexpected record other"),
        (train(note=ConfigRecord({"x": 1})), "unexpected record note"),
        (
            RecordDict({"arrays": SENT, "metrics": ConfigRecord(train_metrics(2, 5, 50))}),
            "record 'metrics' is a ConfigRecord, expected a MetricRecord",
        ),
        (train(without("fc.bias")), "missing arrays fc.bias"),
        (train(changed("extra.weight", torch.zeros(1))), "unexpected arrays extra.weight"),
        (train(changed("fc.weight", torch.zeros(2, 3))), "array fc.weight has shape (2, 3), expected (3, 2)"),
        (
            train(changed("fc.weight", torch.zeros(3, 2, dtype=torch.float64))),
            "array fc.weight has dtype float64, expected float32",
        ),
        (
            train(changed("fc.bias", torch.tensor([0.0, float("nan"), 0.0]))),
            "array fc.bias holds NaN or infinite values",
        ),
        (
            train(changed("fc.bias", torch.tensor([0.0, float("-inf"), 0.0]))),
            "array fc.bias holds NaN or infinite values",
        ),
        (
            train(metrics={k: v for k, v in train_metrics(2, 5, 50).items() if k != "train-loss"}),
            "metrics lacks train-loss",
        ),
        (train(metrics={**train_metrics(2, 5, 50), "bonus": 1}), "metrics has unexpected bonus"),
        (train(metrics=train_metrics(2, 0, 50)), "'num-examples' = 0 is outside [1, inf]"),
        (train(metrics=train_metrics(2, 2.5, 50)), "'num-examples' must be an integer, got 2.5"),
        (train(metrics=train_metrics(2, [5], 50)), "'num-examples' must be an integer, got [5]"),
        (train(metrics=train_metrics(2, 5, 50, train_loss=math.nan)), "'train-loss' = nan is outside [0.0, inf]"),
        (train(metrics=train_metrics(2, 5, 50, train_loss=-1.0)), "'train-loss' = -1.0 is outside [0.0, inf]"),
        (
            train(metrics=train_metrics(2, 5, 50, train_seconds=2 * MAX_SECONDS)),
            "'train-seconds' = 1209600.0 is outside",
        ),
        (train(metrics=train_metrics(2, 5, 50, threads=0)), "'threads' = 0 is outside [1, 4096]"),
        (train(metrics=train_metrics(3, 5, 50)), "reports partition-id 3, but this client is 2"),
        (train(metrics=train_metrics(2, 5, 5000)), "'num-local' = 5000, but the client said it holds 50"),
        (train(metrics=train_metrics(2, 60, 50)), "'num-examples' = 60 exceeds the 50 samples the client holds"),
        (train(metrics=train_metrics(2, 50, 50)), "'num-examples' = 50, but the method trains on 5 of its 50 samples"),
    ],
)
def test_bad_training_replies_are_refused(content: RecordDict, reason: str) -> None:
    assert refused(read_train_reply, content, EXPECTED, HOLDER, expected_examples=5).startswith(reason)


def test_every_declared_training_number_is_required_but_the_optional_ones() -> None:
    for field in TRAIN_METRICS:
        metrics = {k: v for k, v in train_metrics(2, 5, 50).items() if k != field.key}
        if field.optional:
            assert field.key not in read_train_reply(train(metrics=metrics), EXPECTED, HOLDER)
        else:
            assert refused(read_train_reply, train(metrics=metrics), EXPECTED, HOLDER) == f"metrics lacks {field.key}"
    assert {f.key for f in TRAIN_METRICS if f.optional} == {"selected-entropy-mean", "local-entropy-mean"}


def test_an_optional_number_that_is_sent_is_checked() -> None:
    metrics = {**train_metrics(2, 5, 50), "local-entropy-mean": -1.0}
    assert refused(read_train_reply, train(metrics=metrics), EXPECTED, HOLDER) == (
        "'local-entropy-mean' = -1.0 is outside [0.0, inf]"
    )


# --- evaluate -----------------------------------------------------------------------------------------------------


def evaluation(**numbers) -> RecordDict:
    return RecordDict({"metrics": MetricRecord({"eval-loss": 0.7, "eval-acc": 0.8, "num-examples": 50, **numbers})})


def test_a_sound_evaluation_is_read() -> None:
    assert read_evaluate_reply(evaluation(), HOLDER) == {"eval-loss": 0.7, "eval-acc": 0.8, "num-examples": 50}
    assert {f.key for f in EVALUATE_METRICS} == {"eval-loss", "eval-acc", "num-examples"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (evaluation(**{"eval-acc": 1.5}), "'eval-acc' = 1.5 is outside [0.0, 1.0]"),
        (evaluation(**{"eval-loss": math.inf}), "'eval-loss' = inf is outside [0.0, inf]"),
        (evaluation(**{"num-examples": 51}), "'num-examples' = 51 exceeds the 50 samples the client holds"),
        (evaluation(**{"eval-acc": [0.8]}), "'eval-acc' must be a number, got [0.8]"),
        (evaluation(extra=1.0), "metrics has unexpected extra"),
        (RecordDict({"metrics": MetricRecord({"eval-loss": 0.7})}), "metrics lacks eval-acc, num-examples"),
    ],
)
def test_bad_evaluations_are_refused(content: RecordDict, reason: str) -> None:
    assert refused(read_evaluate_reply, content, HOLDER) == reason


def test_a_reply_that_breaks_the_reader_itself_is_only_refused() -> None:
    class Hostile:
        def keys(self):
            raise RuntimeError("no keys for you")

    value, reason = refusal(read_identity, Hostile())
    assert value is None and reason == "unreadable reply (RuntimeError: no keys for you)"
