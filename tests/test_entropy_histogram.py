"""The Fig. 1 data: per-sample hardened-softmax entropy under each ρ, as a direct NumPy computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.entropy_histogram import client_entropies, entropies_by_temperature
from methods.registry import default_config


def test_entropies_equal_a_direct_numpy_computation() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 0.0], [5.0, -1.0, 0.5]])
    result = entropies_by_temperature(logits, [0.1, 1, 10])
    assert list(result) == [0.1, 1.0, 10.0]
    for rho, values in result.items():
        z = logits.numpy().astype(np.float64) / rho
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(values, -(p * np.log(p)).sum(axis=1), rtol=1e-9)
    assert result[10.0][1] == pytest.approx(np.log(3)) and result[0.1][1] == pytest.approx(
        np.log(3)
    )  # uniform stays uniform


def test_client_entropies_cover_the_clients_data_and_harden_with_low_rho(tmp_path) -> None:
    config = default_config(
        dataset="synthetic", model="lenet5", pretrain="none", min_partition_size=5, pretrain_cache_dir=str(tmp_path)
    )
    result = client_entropies(config, partition_id=1, num_partitions=4, temperatures=[0.05, 5.0])
    assert len(result[0.05]) == len(result[5.0]) > 0
    assert result[0.05].mean() < result[5.0].mean()
