"""The server's reading of a FedSplit client's metadata (``feature-metadata`` in a training reply), in the style of
``protocol/replies.py``: bad input until it passes, refused with a reason otherwise.

A sound record holds exactly ``feature-maps`` (float32, S × the map shape the model has at ``common.metadata-level``,
finite) and ``labels`` (int64, S, each a class of the dataset), with 1 ≤ S ≤ the samples the client holds. What
the method allows bounds the counts further: under K-means selection at most ``fedsplit.k-means-clusters`` maps per
class (one per cluster), and no more of a class than the client holds of it; with all metadata, one map per sample, so
exactly the client's label counts where the server knows them exactly (no label-count noise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord

from protocol.messages import FEATURE_MAPS, MAP_LABELS
from protocol.replies import Identity, Refused


@dataclass(frozen=True)
class FeatureMetadata:
    """Validated metadata: feature maps (S × map shape, float32) and their labels (S, int64)."""

    feature_maps: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True)
class MetadataLimits:
    """What one client's metadata may hold this round."""

    map_shape: tuple[int, ...]  # the model's feature-map shape at the metadata level
    num_classes: int
    per_class: int | None  # most maps of one class (K-means: the number of clusters); None: no bound beyond the data
    every_sample: bool  # all metadata: exactly one map per local sample
    class_counts: tuple[int, ...] | None = None  # the client's label counts, where the server knows them exactly


def read_feature_metadata(record: object, identity: Identity, limits: MetadataLimits) -> FeatureMetadata:
    """The metadata of a training reply from the client ``identity``, once every check passes; else ``Refused``."""
    if not isinstance(record, ArrayRecord):
        raise Refused(f"feature metadata is a {type(record).__name__}, expected an ArrayRecord")
    if set(record.keys()) != {FEATURE_MAPS, MAP_LABELS}:
        raise Refused(f"feature metadata must hold '{FEATURE_MAPS}' and '{MAP_LABELS}', got {sorted(record.keys())}")
    maps, labels = record[FEATURE_MAPS], record[MAP_LABELS]
    if str(maps.dtype) != "float32" or str(labels.dtype) != "int64":
        raise Refused(f"feature maps must be float32 and labels int64, got {maps.dtype} and {labels.dtype}")
    count = maps.shape[0] if len(maps.shape) else 0
    if tuple(maps.shape[1:]) != limits.map_shape or len(maps.shape) != len(limits.map_shape) + 1:
        raise Refused(
            f"feature maps have shape {tuple(maps.shape)}, expected (S, {', '.join(map(str, limits.map_shape))})"
        )
    if tuple(labels.shape) != (count,):
        raise Refused(f"{tuple(labels.shape)} labels for {count} feature maps")
    if not 1 <= count <= identity.num_examples:
        raise Refused(f"{count} feature maps; a client holding {identity.num_examples} samples sends 1 to that many")
    if limits.every_sample and count != identity.num_examples:
        raise Refused(f"{count} feature maps, but all metadata is one per sample: {identity.num_examples}")
    values, classes = maps.numpy(), labels.numpy()
    if not np.isfinite(values).all():
        raise Refused("feature maps hold NaN or infinite values")
    if classes.min() < 0 or classes.max() >= limits.num_classes:
        raise Refused(f"labels must be in [0, {limits.num_classes}), got {classes.min()} to {classes.max()}")
    _check_class_counts(np.bincount(classes, minlength=limits.num_classes), limits)
    return FeatureMetadata(values, classes)


def _check_class_counts(sent: np.ndarray, limits: MetadataLimits) -> None:
    """Per-class counts within what the method allows (``MetadataLimits``)."""
    if limits.per_class is not None and sent.max() > limits.per_class:
        label = int(sent.argmax())
        raise Refused(
            f"{sent[label]} feature maps of class {label}; K-means selection sends at most {limits.per_class}"
        )
    if limits.class_counts is None:
        return
    held = np.asarray(limits.class_counts)
    if limits.every_sample and not np.array_equal(sent, held):
        raise Refused(f"metadata label counts {sent.tolist()} differ from the client's label counts {held.tolist()}")
    if (over := np.flatnonzero(sent > held)).size:
        label = int(over[0])
        raise Refused(f"{sent[label]} feature maps of class {label}, but the client holds {int(held[label])} of it")
