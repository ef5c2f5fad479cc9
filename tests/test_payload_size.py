"""Bytes of states and metadata."""

from __future__ import annotations

import pytest
import torch

from methods.common.payload_size import feature_map_bytes, state_bytes


def test_state_bytes_use_each_tensors_element_size() -> None:
    state = {"w": torch.zeros(3, 4), "h": torch.zeros(5, dtype=torch.float16), "n": torch.tensor(0)}
    assert state_bytes(state) == 12 * 4 + 5 * 2 + 8
    assert state_bytes(state, ["h"]) == 10


def test_feature_map_bytes_count_float32_values_and_optional_labels() -> None:
    assert feature_map_bytes(50_000, (64, 8, 8)) == 819_200_000  # Table 5.10, CIFAR-10 raw metadata
    assert feature_map_bytes(2, (4,), label_bytes=8) == 2 * (16 + 8)
    with pytest.raises(ValueError, match="count"):
        feature_map_bytes(-1, (4,))
