"""KSAS scores (Eq. 1-3) against a direct NumPy computation of the paper's formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methods.kafal.ksas import knowledge_log_weights, ksas_scores, top_scores


def numpy_ksas(client: np.ndarray, global_: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """½ Σ_y [P ln P/Q + Q ln Q/P] with P ∝ w·exp(g), Q ∝ w·exp(g'), classes of weight 0 skipped."""
    p = weights * np.exp(client)
    p /= p.sum(axis=1, keepdims=True)
    q = weights * np.exp(global_)
    q /= q.sum(axis=1, keepdims=True)
    keep = weights > 0
    terms = p[:, keep] * np.log(p[:, keep] / q[:, keep]) + q[:, keep] * np.log(q[:, keep] / p[:, keep])
    return 0.5 * terms.sum(axis=1)


RNG = np.random.default_rng(0)
CLIENT = RNG.normal(size=(40, 5)) * 2
GLOBAL = RNG.normal(size=(40, 5)) * 2
COUNTS = np.array([50.0, 3.0, 0.0, 12.0, 1.0])


@pytest.mark.parametrize("lam", [0.1, 1.0, 2.0, 3.0])
def test_specialised_scores_equal_numpy(lam: float) -> None:
    scores = ksas_scores(torch.from_numpy(CLIENT), torch.from_numpy(GLOBAL), torch.from_numpy(COUNTS), lam)
    expected = numpy_ksas(CLIENT, GLOBAL, np.where(COUNTS > 0, COUNTS**lam, 0.0))
    assert torch.isfinite(scores).all()  # the zero-count class does not turn the scores into NaN
    np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-10)


def test_reversed_scores_use_inverse_counts_and_skip_unlabelled_classes() -> None:
    scores = ksas_scores(torch.from_numpy(CLIENT), torch.from_numpy(GLOBAL), torch.from_numpy(COUNTS), 1.0, "reversed")
    inverse = np.where(COUNTS > 0, 1.0 / np.maximum(COUNTS, 1), 0.0)
    np.testing.assert_allclose(scores.numpy(), numpy_ksas(CLIENT, GLOBAL, inverse), rtol=1e-10)


def test_vanilla_scores_are_the_plain_symmetric_kl_and_ignore_counts() -> None:
    scores = ksas_scores(torch.from_numpy(CLIENT), torch.from_numpy(GLOBAL), torch.from_numpy(COUNTS), 1.0, "vanilla")
    np.testing.assert_allclose(scores.numpy(), numpy_ksas(CLIENT, GLOBAL, np.ones(5)), rtol=1e-10)
    zero_lambda = ksas_scores(
        torch.from_numpy(CLIENT), torch.from_numpy(GLOBAL), torch.ones(5, dtype=torch.float64), 0.0
    )
    torch.testing.assert_close(zero_lambda, scores)


def test_hand_computed_two_class_case() -> None:
    # Equal logits except class 0; counts (1, e): P ∝ (e^2, e·1), Q ∝ (1, e·1).
    client = torch.tensor([[2.0, 1.0, 7.0]], dtype=torch.float64)
    global_ = torch.tensor([[0.0, 1.0, -3.0]], dtype=torch.float64)
    counts = torch.tensor([1.0, np.e, 0.0], dtype=torch.float64)
    p = np.array([np.e**2, np.e**2]) / (2 * np.e**2)
    q = np.array([1.0, np.e**2]) / (1 + np.e**2)
    expected = 0.5 * float(np.sum((p - q) * np.log(p / q)))
    assert ksas_scores(client, global_, counts).item() == pytest.approx(expected, rel=1e-12)


def test_float32_scores_stay_on_the_input_dtype() -> None:
    scores = ksas_scores(torch.from_numpy(CLIENT).float(), torch.from_numpy(GLOBAL).float(), torch.from_numpy(COUNTS))
    assert scores.dtype == torch.float32
    np.testing.assert_allclose(scores.numpy(), numpy_ksas(CLIENT, GLOBAL, COUNTS), rtol=2e-4, atol=1e-6)


def test_knowledge_weights_favour_common_classes() -> None:
    # Sample 0: client and global disagree between two common classes; sample 1: between two rare ones.
    # The plain symmetric KL cannot tell them apart; KSAS picks the common-class one, reversed KSAS the other.
    client = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    global_ = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    counts = torch.tensor([100.0, 100.0, 1.0, 1.0])
    vanilla = ksas_scores(client, global_, counts, weighting="vanilla")
    torch.testing.assert_close(vanilla[0], vanilla[1])
    assert top_scores(ksas_scores(client, global_, counts), 1).tolist() == [0]
    assert top_scores(ksas_scores(client, global_, counts, weighting="reversed"), 1).tolist() == [1]


def test_top_scores_ranks_largest_first_with_stable_ties() -> None:
    assert top_scores(torch.tensor([0.5, 2.0, 0.5, 3.0, 2.0]), 4).tolist() == [3, 1, 4, 0]
    with pytest.raises(ValueError, match=r"budget must be in \[0, 5\]"):
        top_scores(torch.zeros(5), 6)


def test_settings_are_validated_by_key() -> None:
    with pytest.raises(ValueError, match="'kafal.kafal-lambda' must be a finite number >= 0"):
        knowledge_log_weights(torch.ones(3), -1.0)
    with pytest.raises(ValueError, match="'kafal.kafal-ksas-weighting' must be one of specialised, vanilla, reversed"):
        knowledge_log_weights(torch.ones(3), 1.0, "inverse")
    with pytest.raises(ValueError, match="at least one labelled sample"):
        knowledge_log_weights(torch.zeros(3))
