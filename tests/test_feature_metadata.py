"""The server's reading of FedSplit metadata: sound records pass, every unsound one is refused naming why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord

from protocol.feature_metadata import MetadataLimits, read_feature_metadata
from protocol.messages import FEATURE_MAPS, MAP_LABELS
from protocol.replies import Identity, Refused, refusal

CLIENT = Identity(partition_id=0, num_partitions=4, num_examples=12)
KMEANS = MetadataLimits(map_shape=(2, 3, 3), num_classes=4, per_class=3, every_sample=False)
ALL = MetadataLimits(map_shape=(2, 3, 3), num_classes=4, per_class=None, every_sample=True)


def metadata(labels: list[int], maps: torch.Tensor | None = None) -> ArrayRecord:
    maps = torch.randn(len(labels), 2, 3, 3) if maps is None else maps
    return ArrayRecord({FEATURE_MAPS: maps, MAP_LABELS: torch.tensor(labels, dtype=torch.int64)})


def test_a_sound_selection_is_read_with_its_maps_and_labels() -> None:
    maps = torch.randn(5, 2, 3, 3)
    read = read_feature_metadata(metadata([0, 0, 2, 3, 3], maps), CLIENT, KMEANS)
    np.testing.assert_array_equal(read.feature_maps, maps.numpy())
    assert read.labels.tolist() == [0, 0, 2, 3, 3] and read.feature_maps.dtype == np.float32


def test_all_metadata_with_the_clients_exact_label_counts_is_read() -> None:
    limits = replace(ALL, class_counts=(6, 0, 6, 0))
    assert len(read_feature_metadata(metadata([0] * 6 + [2] * 6), CLIENT, limits).labels) == 12


@pytest.mark.parametrize(
    ("record", "limits", "reason"),
    [
        (ConfigRecord({"x": 1}), KMEANS, "is a ConfigRecord, expected an ArrayRecord"),
        (ArrayRecord({FEATURE_MAPS: torch.randn(2, 2, 3, 3)}), KMEANS, "must hold 'feature-maps' and 'labels'"),
        (
            ArrayRecord(
                {FEATURE_MAPS: torch.randn(2, 2, 3, 3).double(), MAP_LABELS: torch.zeros(2, dtype=torch.int64)}
            ),
            KMEANS,
            "must be float32 and labels int64, got float64",
        ),
        (
            ArrayRecord({FEATURE_MAPS: torch.randn(2, 2, 3, 3), MAP_LABELS: torch.zeros(2, dtype=torch.int32)}),
            KMEANS,
            "got float32 and int32",
        ),
        (metadata([0, 1], torch.randn(2, 2, 3, 4)), KMEANS, "shape (2, 2, 3, 4), expected (S, 2, 3, 3)"),
        (metadata([0, 1], torch.randn(2, 18)), KMEANS, "shape (2, 18), expected (S, 2, 3, 3)"),
        (metadata([0, 1, 2], torch.randn(2, 2, 3, 3)), KMEANS, "(3,) labels for 2 feature maps"),
        (metadata([]), KMEANS, "0 feature maps; a client holding 12 samples sends 1 to that many"),
        (metadata([0, 1, 2] * 5), replace(KMEANS, per_class=None), "15 feature maps; a client holding 12"),
        (metadata([0, 1], torch.full((2, 2, 3, 3), float("nan"))), KMEANS, "NaN or infinite"),
        (metadata([0, 4]), KMEANS, "labels must be in [0, 4), got 0 to 4"),
        (metadata([-1, 2]), KMEANS, "labels must be in [0, 4), got -1 to 2"),
        (metadata([1, 1, 1, 1, 2]), KMEANS, "4 feature maps of class 1; K-means selection sends at most 3"),
        (
            metadata([0, 2, 2]),
            replace(KMEANS, class_counts=(6, 0, 1, 5)),
            "2 feature maps of class 2, but the client holds 1",
        ),
        (metadata([0] * 11), ALL, "11 feature maps, but all metadata is one per sample: 12"),
        (
            metadata([0] * 7 + [2] * 5),
            replace(ALL, class_counts=(6, 0, 6, 0)),
            "metadata label counts [7, 0, 5, 0] differ from the client's label counts [6, 0, 6, 0]",
        ),
    ],
)
def test_unsound_metadata_is_refused_naming_the_reason(record: object, limits: MetadataLimits, reason: str) -> None:
    with pytest.raises(Refused) as err:
        read_feature_metadata(record, CLIENT, limits)
    assert reason in str(err.value)


def test_a_record_whose_bytes_do_not_match_its_shape_is_only_a_refusal() -> None:
    record = metadata([0, 1])
    record[FEATURE_MAPS].data = b"\x00" * 5  # a hostile client's truncated payload
    result, reason = refusal(read_feature_metadata, record, CLIENT, KMEANS)
    assert result is None and reason and reason.startswith("unreadable reply")
