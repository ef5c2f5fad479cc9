"""Linear CKA: equal to the feature-space formula, invariant to rotation and scale, 1 for identical inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.cka import cka_matrix, linear_cka, mean_off_diagonal


def feature_space_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s eq. (5): ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F) on column-centred features."""
    x, y = x - x.mean(axis=0), y - y.mean(axis=0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def test_equals_the_feature_space_formula() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 7)), rng.normal(size=(50, 3))
    y[:, 0] += x[:, 0]
    assert linear_cka(torch.from_numpy(x), torch.from_numpy(y)) == pytest.approx(feature_space_cka(x, y), rel=1e-10)


def test_invariant_to_rotation_isotropic_scaling_and_shift_and_flattens_maps() -> None:
    torch.manual_seed(0)
    x = torch.randn(40, 2, 3, 3)
    rotation, _ = torch.linalg.qr(torch.randn(18, 18))
    y = 3.0 * x.reshape(40, -1) @ rotation + 5.0
    assert linear_cka(x, y) == pytest.approx(1.0, abs=1e-6)
    assert linear_cka(x, torch.randn(40, 18)) < 0.8


def test_different_number_of_inputs_is_an_error() -> None:
    with pytest.raises(ValueError, match="different inputs: 4 and 5 rows"):
        linear_cka(torch.randn(4, 2), torch.randn(5, 2))


def test_matrix_is_symmetric_with_unit_diagonal_and_averages_batches() -> None:
    torch.manual_seed(1)
    batches = [[torch.randn(30, 4) for _ in range(3)] for _ in range(2)]
    matrix = cka_matrix(batches)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    np.testing.assert_allclose(matrix, matrix.T)
    expected = np.mean([linear_cka(b[0], b[2]) for b in batches])
    assert matrix[0, 2] == pytest.approx(expected)
    assert mean_off_diagonal(matrix) == pytest.approx((matrix.sum() - 3) / 6)
