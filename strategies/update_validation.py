"""Is a client's training reply fit to be averaged into the global model?

A reply is checked against the arrays the server sent: the same keys (none missing, none extra), the
same shapes and dtypes, finite values, and a positive integer ``num-examples``. One bad reply must
never reach the weighted mean, where a single NaN or a wrong weight would poison every later round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord, RecordDict


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one array of the global model."""

    shape: tuple[int, ...]
    dtype: str


def array_specs(arrays: ArrayRecord) -> dict[str, ArraySpec]:
    """The shapes and dtypes a reply must match (taken from what the server sent)."""
    return {key: ArraySpec(tuple(array.shape), str(array.dtype)) for key, array in arrays.items()}


def _list(keys) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def rejection_reason(
    content: RecordDict, expected: Mapping[str, ArraySpec], arrays_key: str = "arrays", weight_key: str = "num-examples"
) -> str | None:
    """Why this training reply must not be aggregated, or None when it is sound."""
    if arrays_key not in content.array_records:
        return f"no '{arrays_key}' array record"
    if len(content.array_records) != 1:
        return f"array records {_list(content.array_records)}; expected only '{arrays_key}'"
    arrays = content[arrays_key]
    missing, extra = expected.keys() - arrays.keys(), arrays.keys() - expected.keys()
    if missing:
        return f"missing arrays {_list(missing)}"
    if extra:
        return f"unexpected arrays {_list(extra)}"
    for key, spec in expected.items():
        array = arrays[key]
        if tuple(array.shape) != spec.shape:
            return f"array {key} has shape {tuple(array.shape)}, expected {spec.shape}"
        if str(array.dtype) != spec.dtype:
            return f"array {key} has dtype {array.dtype}, expected {spec.dtype}"
        values = array.numpy()
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            return f"array {key} holds NaN or infinite values"
    if len(content.metric_records) != 1:
        return f"{len(content.metric_records)} metric records; expected one"
    metrics = next(iter(content.metric_records.values()))
    weight = metrics.get(weight_key)
    if not isinstance(weight, int) or isinstance(weight, bool) or weight <= 0:
        return f"'{weight_key}' must be a positive integer, got {weight!r}"
    loss = metrics.get("train-loss", 0.0)
    if isinstance(loss, float) and not math.isfinite(loss):
        return f"'train-loss' is {loss}"
    return None


def conform_to(arrays: ArrayRecord, expected: Mapping[str, ArraySpec]) -> ArrayRecord:
    """The aggregate with the sent dtypes restored: Flower's weighted mean turns integer arrays (BatchNorm's
    ``num_batches_tracked``) into float64, and clients would then send back arrays of another dtype."""
    conformed = {}
    for key, array in arrays.items():
        values, dtype = array.numpy(), np.dtype(expected[key].dtype)
        if dtype.kind in "iu" and values.dtype.kind == "f":
            values = np.rint(values)
        conformed[key] = Array(np.asarray(values.astype(dtype)))
    return ArrayRecord(conformed)
