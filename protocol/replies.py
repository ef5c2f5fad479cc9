"""The server's side of the boundary: every reply is read through one of these functions before anything uses it.

A client can be broken or hostile, so a reply is bad input until it passes: exactly the declared records, each of
the declared kind; exactly the declared numbers, of the declared type, finite and in range; arrays with the names,
shapes and dtypes the server sent, and finite values; counts consistent with what the client said about itself
(``Identity``, from ``query.identify``). A reply that fails raises ``Refused`` with a reason for the logs and
rounds.jsonl; ``refusal`` turns any other exception raised while reading (a malformed record Flower itself chokes
on) into a refusal too, so no reply can raise inside the ServerApp.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from protocol.messages import (
    ARRAYS,
    CLASS_MAPS,
    CLASS_PRESENT,
    CLIENT_MODEL_RECORD,
    COUNTS,
    EVALUATE_METRICS,
    FEATURE_MAPS,
    IDENTITY,
    IDENTITY_FIELDS,
    LABEL_COUNTS_RECORD,
    MAP_LABELS,
    METRICS,
    MODEL_NAME,
    NUM_EXAMPLES,
    NUM_LOCAL,
    NUM_PARTITIONS,
    PARTITION_ID,
    TRAIN_METRICS,
    Number,
)

T = TypeVar("T")
MAX_REASON = 300


class Refused(ValueError):
    """The reply is not used; the message says why."""


@dataclass(frozen=True)
class Identity:
    """What a client says about itself when it joins (``query.identify``)."""

    partition_id: int
    num_partitions: int
    num_examples: int


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one array the server sent."""

    shape: tuple[int, ...]
    dtype: str


def array_specs(arrays: ArrayRecord) -> dict[str, ArraySpec]:
    """The shapes and dtypes a reply's arrays must match (taken from what the server sent)."""
    return {key: ArraySpec(tuple(array.shape), str(array.dtype)) for key, array in arrays.items()}


def refusal(read: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, str | None]:
    """``(read(...), None)``, or ``(None, reason)`` when the reply is refused or reading it raised anything."""
    try:
        return read(*args, **kwargs), None
    except Refused as err:
        return None, str(err)[:MAX_REASON]
    except Exception as err:  # a malformed record can break Flower's own accessors: still only a refusal
        return None, f"unreadable reply ({type(err).__name__}: {str(err)[:200]})"


def key_names(keys: Iterable[str]) -> str:
    keys = sorted(str(k) for k in keys)
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def check_records(content: RecordDict, expected: Mapping[str, type]) -> None:
    """Exactly the ``expected`` records (name -> ArrayRecord, MetricRecord or ConfigRecord), each of its kind."""
    present = set(content.keys())
    if missing := set(expected) - present:
        raise Refused(f"missing record {key_names(missing)}")
    if extra := present - set(expected):
        raise Refused(f"unexpected record {key_names(extra)}")
    for name, kind in expected.items():
        if not isinstance(content[name], kind):
            raise Refused(f"record '{name}' is a {type(content[name]).__name__}, expected a {kind.__name__}")


def read_numbers(record: Mapping[str, Any], fields: Iterable[Number], where: str) -> dict[str, int | float]:
    """The declared numbers of ``record``: none missing (but the optional ones), none extra, of their type, finite,
    in range."""
    fields = [f for f in fields if not f.optional or f.key in record.keys()]
    keys = {f.key for f in fields}
    if missing := keys - set(record.keys()):
        raise Refused(f"{where} lacks {key_names(missing)}")
    if extra := set(record.keys()) - keys:
        raise Refused(f"{where} has unexpected {key_names(extra)}")
    values: dict[str, int | float] = {}
    for field in fields:
        value = record[field.key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (field.kind is int and not isinstance(value, int))
        ):
            raise Refused(f"'{field.key}' must be {'an integer' if field.kind is int else 'a number'}, got {value!r}")
        if not math.isfinite(value) or not field.low <= value <= field.high:
            raise Refused(f"'{field.key}' = {value!r} is outside [{field.low}, {field.high}]")
        values[field.key] = value
    return values


def read_identity(content: RecordDict) -> Identity:
    """A ``query.identify`` reply (its label counts, when it holds them, are read by ``read_label_counts``)."""
    expected: dict[str, type] = {IDENTITY: MetricRecord}
    if LABEL_COUNTS_RECORD in content.keys():
        expected[LABEL_COUNTS_RECORD] = ConfigRecord
    check_records(content, expected)
    numbers = read_numbers(content[IDENTITY], IDENTITY_FIELDS, "identity")
    if numbers[PARTITION_ID] >= numbers[NUM_PARTITIONS]:
        raise Refused(f"partition-id {numbers[PARTITION_ID]} is not below num-partitions {numbers[NUM_PARTITIONS]}")
    return Identity(int(numbers[PARTITION_ID]), int(numbers[NUM_PARTITIONS]), int(numbers[NUM_EXAMPLES]))


def read_label_counts(content: RecordDict, num_classes: int, identity: Identity, noisy: bool) -> np.ndarray:
    """A ``query.label_counts`` reply: one whole number ≥ 0 per class (clients round and clip their noise); without
    differential privacy they add up to the samples the client said it holds."""
    check_records(content, {LABEL_COUNTS_RECORD: ConfigRecord})
    record = content[LABEL_COUNTS_RECORD]
    if set(record.keys()) != {COUNTS}:
        raise Refused(f"label counts must hold only '{COUNTS}', got {key_names(record.keys())}")
    raw = record[COUNTS]
    if not isinstance(raw, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        raise Refused("label counts are not a list of numbers")
    values = np.asarray(raw, dtype=np.float64)
    if values.shape != (num_classes,):
        raise Refused(f"{values.size} label counts for {num_classes} labels")
    if not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(values != np.round(values)):
        raise Refused("label counts must be whole numbers >= 0")
    if not noisy and values.sum() != identity.num_examples:
        raise Refused(
            f"label counts add up to {values.sum():.0f}, but the client said it holds {identity.num_examples} samples"
        )
    return values


def check_arrays(arrays: ArrayRecord, expected: Mapping[str, ArraySpec]) -> None:
    """The arrays the server sent, by name, shape and dtype, holding only finite values."""
    if missing := expected.keys() - arrays.keys():
        raise Refused(f"missing arrays {key_names(missing)}")
    if extra := arrays.keys() - expected.keys():
        raise Refused(f"unexpected arrays {key_names(extra)}")
    for key, spec in expected.items():
        array = arrays[key]
        if tuple(array.shape) != spec.shape:
            raise Refused(f"array {key} has shape {tuple(array.shape)}, expected {spec.shape}")
        if str(array.dtype) != spec.dtype:
            raise Refused(f"array {key} has dtype {array.dtype}, expected {spec.dtype}")
        values = array.numpy()
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            raise Refused(f"array {key} holds NaN or infinite values")


def read_train_reply(
    content: RecordDict,
    expected: Mapping[str, ArraySpec],
    identity: Identity,
    expected_examples: int | None = None,
    metrics: Iterable[Number] = TRAIN_METRICS,
    extra_records: Mapping[str, type] | None = None,
) -> dict[str, int | float]:
    """A training reply's metrics, once its records, arrays and numbers pass: it speaks for its own partition,
    holds the samples it said it holds, trained on no more of them, and, where the method fixes how many it trains
    on (``expected_examples``), on exactly that many. A method that replies with more declares its ``metrics`` and
    ``extra_records`` (name -> record kind) and reads their contents itself."""
    check_records(content, {ARRAYS: ArrayRecord, METRICS: MetricRecord, **(extra_records or {})})
    check_arrays(content.array_records[ARRAYS], expected)
    numbers = read_numbers(content.metric_records[METRICS], metrics, "metrics")
    check_counts(numbers, identity, expected_examples)
    return numbers


def check_counts(numbers: Mapping[str, int | float], identity: Identity, expected_examples: int | None) -> None:
    """A training reply speaks for its own partition, holds the samples it said it holds, trained on no more of
    them, and on exactly ``expected_examples`` where the method fixes that."""
    if numbers[PARTITION_ID] != identity.partition_id:
        raise Refused(f"reports partition-id {numbers[PARTITION_ID]}, but this client is {identity.partition_id}")
    if numbers[NUM_LOCAL] != identity.num_examples:
        raise Refused(f"'num-local' = {numbers[NUM_LOCAL]}, but the client said it holds {identity.num_examples}")
    if numbers[NUM_EXAMPLES] > identity.num_examples:
        raise Refused(
            f"'num-examples' = {numbers[NUM_EXAMPLES]} exceeds the {identity.num_examples} samples the client holds"
        )
    if expected_examples is not None and numbers[NUM_EXAMPLES] != expected_examples:
        raise Refused(
            f"'num-examples' = {numbers[NUM_EXAMPLES]}, but the method trains on {expected_examples} of "
            f"its {identity.num_examples} samples"
        )


def read_evaluate_reply(content: RecordDict, identity: Identity) -> dict[str, int | float]:
    """An evaluation reply's metrics: a loss, an accuracy in [0, 1], and at most the samples the client holds."""
    check_records(content, {METRICS: MetricRecord})
    numbers = read_numbers(content[METRICS], EVALUATE_METRICS, "metrics")
    if numbers[NUM_EXAMPLES] > identity.num_examples:
        raise Refused(
            f"'num-examples' = {numbers[NUM_EXAMPLES]} exceeds the {identity.num_examples} samples the client holds"
        )
    return numbers


def read_client_model(content: RecordDict, usable: Callable[[str], None]) -> str:
    """A ``query.client_model`` reply: the name of an architecture that ``usable`` accepts (it raises ValueError
    for one the app cannot build, or that cannot pair with the global model)."""
    check_records(content, {CLIENT_MODEL_RECORD: ConfigRecord})
    record = content[CLIENT_MODEL_RECORD]
    if set(record.keys()) != {MODEL_NAME}:
        raise Refused(f"client model must hold only '{MODEL_NAME}', got {key_names(record.keys())}")
    name = record[MODEL_NAME]
    if not isinstance(name, str):
        raise Refused(f"client model name is a {type(name).__name__}, not a string")
    try:
        usable(name)
    except ValueError as err:
        raise Refused(f"client model {name[:60]!r}: {err}") from None
    return name


def _finite_array(record: ArrayRecord, key: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    array = record[key]
    if tuple(array.shape) != shape:
        raise Refused(f"{key} has shape {tuple(array.shape)}, expected {shape}")
    if str(array.dtype) != dtype:
        raise Refused(f"{key} has dtype {array.dtype}, expected {dtype}")
    values = array.numpy()
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise Refused(f"{key} holds NaN or infinite values")
    return values


def _check_keys(record: ArrayRecord, keys: set[str], where: str) -> None:
    if set(record.keys()) != keys:
        raise Refused(f"{where} must hold exactly {key_names(keys)}, got {key_names(record.keys())}")


def read_metadata(
    record: ArrayRecord,
    count: int,
    map_shape: tuple[int, ...],
    num_classes: int,
    label_counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A FedAT reply's metadata: ``count`` finite float32 maps of ``map_shape`` and ``count`` int64 labels of the
    task's classes; with ``label_counts`` (the client's exact counts, when all its samples are sent) the labels must
    be exactly its samples'. Returns (maps, labels)."""
    _check_keys(record, {FEATURE_MAPS, MAP_LABELS}, "metadata")
    maps = _finite_array(record, FEATURE_MAPS, (count, *map_shape), "float32")
    labels = _finite_array(record, MAP_LABELS, (count,), "int64")
    if count and (labels.min() < 0 or labels.max() >= num_classes):
        raise Refused(f"metadata labels must lie in [0, {num_classes})")
    if label_counts is not None and not np.array_equal(np.bincount(labels, minlength=num_classes), label_counts):
        raise Refused("metadata labels do not match the label counts the client reported")
    return maps, labels


def read_prototypes(
    record: ArrayRecord, num_classes: int, map_shape: tuple[int, ...], label_counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A FedKAD reply's prototypes: one finite float32 map of ``map_shape`` per class and a 0/1 uint8 presence flag
    per class, absent classes all-zero; with ``label_counts`` (exact) a class is present iff the client holds it.
    Returns (maps, present as bool)."""
    _check_keys(record, {CLASS_MAPS, CLASS_PRESENT}, "prototypes")
    maps = _finite_array(record, CLASS_MAPS, (num_classes, *map_shape), "float32")
    flags = _finite_array(record, CLASS_PRESENT, (num_classes,), "uint8")
    if not np.isin(flags, (0, 1)).all():
        raise Refused("prototype presence flags must be 0 or 1")
    present = flags.astype(bool)
    if np.abs(maps[~present]).sum() != 0:
        raise Refused("a prototype of a class the client does not hold is not zero")
    if label_counts is not None and not np.array_equal(present, label_counts > 0):
        raise Refused("prototype presence does not match the label counts the client reported")
    return maps, present
