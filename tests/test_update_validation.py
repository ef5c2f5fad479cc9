"""rejection_reason: every kind of malformed training reply is named; a sound one passes."""

from __future__ import annotations

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from strategies.update_validation import array_specs, rejection_reason

SENT = ArrayRecord({"fc.weight": torch.zeros(3, 2), "fc.bias": torch.zeros(3), "bn.num_batches_tracked": torch.tensor(4)})
EXPECTED = array_specs(SENT)


def reply(arrays: dict | None = None, metrics: dict | None = None, **extra_records) -> RecordDict:
    arrays = arrays if arrays is not None else {k: v.clone() for k, v in SENT.to_torch_state_dict().items()}
    metrics = metrics if metrics is not None else {"num-examples": 12, "train-loss": 0.5}
    return RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord(metrics), **extra_records})


def sound() -> dict:
    return {k: v.clone() for k, v in SENT.to_torch_state_dict().items()}


def test_a_sound_reply_passes() -> None:
    assert rejection_reason(reply(), EXPECTED) is None


def with_(key: str, value: torch.Tensor) -> dict:
    return {**sound(), key: value}


def without(key: str) -> dict:
    return {k: v for k, v in sound().items() if k != key}


@pytest.mark.parametrize(
    "content, reason",
    [
        (RecordDict({"metrics": MetricRecord({"num-examples": 1})}), "no 'arrays' array record"),
        (reply(other=ArrayRecord({"x": torch.zeros(1)})), "array records arrays, other; expected only 'arrays'"),
        (reply(without("fc.bias")), "missing arrays fc.bias"),
        (reply(with_("extra.weight", torch.zeros(1))), "unexpected arrays extra.weight"),
        (reply(with_("fc.weight", torch.zeros(2, 3))), "array fc.weight has shape (2, 3), expected (3, 2)"),
        (reply(with_("fc.weight", torch.zeros(3, 2, dtype=torch.float64))),
         "array fc.weight has dtype float64, expected float32"),
        (reply(with_("fc.bias", torch.tensor([0.0, float("nan"), 0.0]))), "array fc.bias holds NaN or infinite values"),
        (reply(with_("fc.bias", torch.tensor([0.0, float("-inf"), 0.0]))), "array fc.bias holds NaN or infinite values"),
        (reply(metrics={"train-loss": 0.1}), "'num-examples' must be a positive integer, got None"),
        (reply(metrics={"num-examples": 0}), "'num-examples' must be a positive integer, got 0"),
        (reply(metrics={"num-examples": -5}), "'num-examples' must be a positive integer, got -5"),
        (reply(metrics={"num-examples": 2.5}), "'num-examples' must be a positive integer, got 2.5"),
        (reply(metrics={"num-examples": 3, "train-loss": float("nan")}), "'train-loss' is nan"),
        (reply(extra=MetricRecord({"a": 1})), "2 metric records; expected one"),
    ],
)
def test_malformed_replies_are_named(content: RecordDict, reason: str) -> None:
    assert rejection_reason(content, EXPECTED) == reason


def test_config_records_do_not_count_as_arrays_or_metrics() -> None:
    assert rejection_reason(reply(note=ConfigRecord({"x": 1})), EXPECTED) is None
