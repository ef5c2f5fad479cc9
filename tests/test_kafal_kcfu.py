"""KCFU (Eq. 4-6): balanced loss, Γ, mixing and the compensation term against hand and NumPy computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from methods.kafal.kcfu import (
    KCFUOptions,
    class_terms,
    client_loss,
    compensation_class_weights,
    compensation_loss,
    draw_mixing,
    kcfu_loss,
    mix,
)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_balanced_loss_by_hand() -> None:
    logits = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]], dtype=torch.float64)
    counts = torch.tensor([2.0, 1.0, 4.0])
    terms = class_terms(counts, KCFUOptions(), "cpu")
    first = -math.log(2 * math.e / (2 * math.e + math.e**2 + 4))
    second = -math.log(4 * math.e**3 / (2 * math.e**0.5 + math.e**-1 + 4 * math.e**3))
    loss = client_loss(logits, torch.tensor([0, 2]), terms.log_counts)
    assert loss.item() == pytest.approx((first + second) / 2, rel=1e-6)


def test_plain_cross_entropy_ablation_ignores_counts() -> None:
    logits, labels = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    terms = class_terms(torch.tensor([5.0, 1.0, 1.0]), KCFUOptions(balanced=False), "cpu")
    assert terms.log_counts is None
    torch.testing.assert_close(
        client_loss(logits, labels, terms.log_counts), nn.functional.cross_entropy(logits, labels)
    )


def test_balanced_loss_with_an_unlabelled_class_is_finite_with_zero_gradient_there() -> None:
    logits = torch.randn(4, 3, requires_grad=True)
    terms = class_terms(torch.tensor([3.0, 0.0, 1.0]), KCFUOptions(), "cpu")
    loss = client_loss(logits, torch.tensor([0, 2, 0, 2]), terms.log_counts)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[:, 1], torch.zeros(4))


def test_gamma_normalised_paper_and_uniform() -> None:
    counts = torch.tensor([6.0, 3.0, 0.0, 1.0])  # Σn = 10: raw 10/6, 10/3, 0, 10 (sum 15)
    torch.testing.assert_close(compensation_class_weights(counts), torch.tensor([1 / 9, 2 / 9, 0.0, 2 / 3]))
    torch.testing.assert_close(
        compensation_class_weights(counts, normalise=False), torch.tensor([10 / 6, 10 / 3, 0, 10])
    )
    torch.testing.assert_close(compensation_class_weights(counts, weighting="uniform"), torch.full((4,), 0.25))
    with pytest.raises(ValueError, match="at least one labelled sample"):
        compensation_class_weights(torch.zeros(3))


@pytest.mark.parametrize(("reduction", "divisor"), [("sum", 1.0), ("class-mean", 4.0)])
def test_compensation_loss_equals_numpy(reduction: str, divisor: float) -> None:
    rng = np.random.default_rng(1)
    student, teacher, weights = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.uniform(size=5)
    p_t, p_s = softmax(teacher), softmax(student)
    expected = np.mean(weights * (p_t * np.log(p_t / p_s)).sum(axis=1) / divisor)
    loss = compensation_loss(torch.from_numpy(student), torch.from_numpy(teacher), torch.from_numpy(weights), reduction)
    assert loss.item() == pytest.approx(expected, rel=1e-10)


def test_mix_is_the_convex_combination_with_the_partner() -> None:
    x = torch.arange(12.0).view(3, 2, 2)
    weights, partner = torch.tensor([0.25, 1.0, 0.5]), torch.tensor([2, 0, 1])
    expected = torch.stack([0.25 * x[0] + 0.75 * x[2], x[1], 0.5 * x[2] + 0.5 * x[1]])
    torch.testing.assert_close(mix(x, weights, partner), expected)


def test_mixing_draws_are_seeded_beta_2_2_and_pair_as_asked() -> None:
    weights, partner = draw_mixing(4000, torch.Generator().manual_seed(0))
    again, same_partner = draw_mixing(4000, torch.Generator().manual_seed(0))
    assert torch.equal(weights, again) and torch.equal(partner, same_partner)
    assert sorted(partner.tolist()) == list(range(4000))
    assert 0 < weights.min() and weights.max() < 1
    assert weights.mean().item() == pytest.approx(0.5, abs=0.02)
    assert weights.var().item() == pytest.approx(0.05, abs=0.005)  # Beta(2, 2): variance 1/20
    _, shared = draw_mixing(7, torch.Generator().manual_seed(0), pairing="shared")
    assert len(set(shared.tolist())) == 1


def models() -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(0)
    return nn.Linear(4, 3).double(), nn.Linear(4, 3).double()


DATA = torch.Generator().manual_seed(7)
X = torch.randn(6, 4, generator=DATA, dtype=torch.float64)
Y = torch.tensor([0, 0, 1, 2, 0, 1])
U = torch.randn(8, 4, generator=DATA, dtype=torch.float64) * 3
COUNTS = torch.tensor([3.0, 2.0, 1.0])


def expected_kcfu(student: nn.Module, teacher: nn.Module, options: KCFUOptions, seed: int) -> float:
    """The loss written out step by step from the paper's equations (and the options' code variants)."""
    p = softmax(student(X).detach().numpy() + np.log(COUNTS.numpy()))
    l_client = -np.mean(np.log(p[np.arange(6), Y.numpy()]))
    weights, partner = draw_mixing(8, torch.Generator().manual_seed(seed), options.beta, options.pairing)
    mixed = weights.double().view(-1, 1) * U + (1 - weights.double().view(-1, 1)) * U[partner]
    source = U if options.pseudo_labels == "unmixed" else mixed
    pseudo = teacher(source).argmax(dim=1).numpy()
    raw = np.array([6 / 3, 6 / 2, 6 / 1])
    gamma = raw / raw.sum() if options.normalise_gamma else raw
    w = weights.numpy() * gamma[pseudo] + (1 - weights.numpy()) * gamma[pseudo[partner.numpy()]]
    p_t, p_s = softmax(teacher(mixed).detach().numpy()), softmax(student(mixed).detach().numpy())
    kl = (p_t * np.log(p_t / p_s)).sum(axis=1) / (3 if options.kl_reduction == "class-mean" else 1)
    return options.client_weight * l_client + options.compensation_weight * float(np.mean(w * kl))


@pytest.mark.parametrize(
    "options", [KCFUOptions(), KCFUOptions.authors_code(), KCFUOptions.from_nu(0.3, normalise_gamma=False)]
)
def test_kcfu_loss_equals_the_written_out_equations(options: KCFUOptions) -> None:
    student, teacher = models()
    terms = class_terms(COUNTS, options, "cpu")
    loss = kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator().manual_seed(11), options)
    assert loss.total.item() == pytest.approx(expected_kcfu(student, teacher, options, 11), rel=1e-6)
    assert loss.compensation is not None and loss.compensation.item() > 0


def test_first_round_and_ablation_train_on_the_client_loss_alone() -> None:
    student, teacher = models()
    terms = class_terms(COUNTS, KCFUOptions(), "cpu")
    alone = client_loss(student(X), Y, terms.log_counts)
    first_round = kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator(), compensate=False)
    no_term = kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator(), KCFUOptions(compensation=False))
    empty_pool = kcfu_loss(student, teacher, X, Y, U[:0], terms, torch.Generator())
    for loss in (first_round, no_term, empty_pool):
        assert loss.total.item() == pytest.approx(alone.item(), rel=1e-12) and loss.compensation is None


def test_without_mixing_each_sample_is_weighted_by_its_own_pseudo_label() -> None:
    student, teacher = models()
    options = KCFUOptions(mixing=False)
    terms = class_terms(COUNTS, options, "cpu")
    loss = kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator(), options)
    raw = torch.tensor([2.0, 3.0, 6.0], dtype=torch.float64)
    weights = (raw / raw.sum())[teacher(U).argmax(dim=1)]
    expected = compensation_loss(student(U), teacher(U), weights)
    assert loss.compensation is not None
    assert loss.compensation.item() == pytest.approx(expected.item(), rel=1e-6)


def test_uniform_gamma_weights_every_mixed_sample_one_over_c() -> None:
    student, teacher = models()
    options = KCFUOptions(mixing=False, class_weighting="uniform")
    terms = class_terms(COUNTS, options, "cpu")
    loss = kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator(), options)
    expected = compensation_loss(student(U), teacher(U), torch.full((8,), 1 / 3, dtype=torch.float64))
    assert loss.compensation is not None and loss.compensation.item() == pytest.approx(expected.item(), rel=1e-6)


def test_gradients_reach_the_student_only() -> None:
    student, teacher = models()
    terms = class_terms(COUNTS, KCFUOptions(), "cpu")
    kcfu_loss(student, teacher, X, Y, U, terms, torch.Generator().manual_seed(0)).total.backward()
    assert student.weight.grad is not None and torch.isfinite(student.weight.grad).all()
    assert teacher.weight.grad is None


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match=r"'kafal.kafal-nu' must be in \[0, 1\]"):
        KCFUOptions.from_nu(1.5)
    with pytest.raises(ValueError, match="pairing must be one of permutation, shared"):
        KCFUOptions(pairing="random")
    with pytest.raises(ValueError, match="class_weighting must be one of inverse-frequency, uniform"):
        KCFUOptions(class_weighting="1/C")


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_kcfu_loss_on_the_device_equals_the_cpu_loss(device: str) -> None:
    student, teacher = models()
    expected = kcfu_loss(
        student, teacher, X, Y, U, class_terms(COUNTS, KCFUOptions(), "cpu"), torch.Generator().manual_seed(3)
    )
    student.to(device)
    teacher.to(device)
    loss = kcfu_loss(
        student,
        teacher,
        X.to(device),
        Y.to(device),
        U.to(device),
        class_terms(COUNTS, KCFUOptions(), device),
        torch.Generator().manual_seed(3),
    )
    assert loss.total.device.type == torch.device(device).type
    assert loss.total.item() == pytest.approx(expected.total.item(), rel=1e-6)
