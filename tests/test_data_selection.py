"""Hardened-softmax entropy and top-k selection against a direct NumPy computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from client_app.data_selection import (
    hardened_entropy,
    select_by_entropy,
    select_random,
    select_samples,
)
from data.sample_share import selection_size


def numpy_entropy(logits: np.ndarray, rho: float) -> np.ndarray:
    z = logits / rho
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return -terms.sum(axis=1)


@pytest.mark.parametrize("rho", [0.01, 0.1, 0.5, 1.0, 10.0])
def test_entropy_and_top_k_equal_numpy(rho: float) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(500, 10)) * 3
    h = hardened_entropy(torch.from_numpy(logits), rho).numpy()
    np.testing.assert_allclose(h, numpy_entropy(logits, rho), rtol=1e-9, atol=1e-12)
    k = math.ceil(0.1 * 500)
    expected = np.argsort(-numpy_entropy(logits, rho), kind="stable")[:k]
    assert select_by_entropy(torch.from_numpy(h), k).tolist() == expected.tolist()


def test_rho_one_is_the_plain_softmax_entropy() -> None:
    logits = torch.from_numpy(np.random.default_rng(1).normal(size=(300, 10)) * 3)
    plain = torch.distributions.Categorical(logits=logits).entropy()
    torch.testing.assert_close(hardened_entropy(logits, 1.0), plain)
    assert select_by_entropy(hardened_entropy(logits, 1.0), 30).tolist() == select_by_entropy(plain, 30).tolist()


def test_very_large_rho_tends_to_uniform_and_ranks_by_logit_variance() -> None:
    # H(softmax(z/ρ)) = log C − Var_j(z)/(2ρ²) + O(ρ⁻³): as ρ grows every entropy tends to log C and the
    # ranking tends to ascending logit variance (it does not tend to the plain-softmax ranking).
    logits = torch.from_numpy(np.random.default_rng(1).normal(size=(300, 10)) * 3)
    soft = hardened_entropy(logits, 1e4)
    assert torch.allclose(soft, torch.full_like(soft, math.log(10)), atol=1e-6)
    lowest_variance = torch.argsort(logits.var(dim=1), stable=True)[:30]
    assert set(select_by_entropy(soft, 30).tolist()) == set(lowest_variance.tolist())


def test_hardening_sharpens_the_distribution_of_entropies() -> None:
    logits = torch.from_numpy(np.random.default_rng(2).normal(size=(1000, 10)) * 2)
    hard, plain = hardened_entropy(logits, 0.1), hardened_entropy(logits, 1.0)
    assert hard.median() < 0.5 * plain.median()  # most samples look certain at ρ = 0.1 (paper, Fig. 1)


def test_tiny_temperature_does_not_overflow() -> None:
    h = hardened_entropy(torch.tensor([[1000.0, 999.0, -5.0]]), 1e-4)
    assert torch.isfinite(h).all() and h.item() >= 0


@pytest.mark.parametrize(
    ("n", "fraction", "size"), [(30, 0.1, 3), (31, 0.1, 4), (5, 0.1, 1), (1, 0.5, 1), (10, 1.0, 10)]
)
def test_selection_size_is_ceiling_and_at_least_one(n: int, fraction: float, size: int) -> None:
    assert selection_size(n, fraction) == size


def test_random_subset_is_redrawn_with_the_generator() -> None:
    a = select_random(100, 10, torch.Generator().manual_seed(0))
    b = select_random(100, 10, torch.Generator().manual_seed(1))
    assert len(set(a.tolist())) == 10 and a.tolist() != b.tolist()


def test_policies() -> None:
    h = torch.tensor([0.1, 0.9, 0.5, 0.7])
    g = torch.Generator().manual_seed(0)
    assert select_samples("all", h, 0.5, g).tolist() == [0, 1, 2, 3]
    assert select_samples("entropy", h, 0.5, g).tolist() == [1, 3]
    assert len(select_samples("random", h, 0.5, g)) == 2
    with pytest.raises(ValueError, match="temperature must be > 0"):
        hardened_entropy(h.view(1, -1), 0.0)
