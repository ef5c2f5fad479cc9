"""MOON's model-contrastive loss against a hand computation, and the representation it reads."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from methods.moon import (
    anchor_representation,
    check_moon_settings,
    local_logits_and_representation,
    moon_contrastive_loss,
    moon_loss,
)
from models import build_model

Z = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
Z_GLOBAL = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
Z_PREVIOUS = torch.tensor([[-1.0, 0.0], [3.0, 0.0]], dtype=torch.float64)


def test_contrastive_loss_matches_hand_computation() -> None:
    # Sample 0: cos(z, z_glob) = 1/√2, cos(z, z_prev) = −1; sample 1: 1 and 0. τ = 0.5.
    tau = 0.5
    expected = [
        -math.log(math.exp(2**-0.5 / tau) / (math.exp(2**-0.5 / tau) + math.exp(-1 / tau))),
        -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0 / tau))),
    ]
    loss = moon_contrastive_loss(Z, Z_GLOBAL, Z_PREVIOUS, tau)
    assert loss.item() == pytest.approx(sum(expected) / 2, rel=1e-12)


def test_temperature_changes_the_loss() -> None:
    tau = 0.1
    expected = -math.log(math.exp(2**-0.5 / tau) / (math.exp(2**-0.5 / tau) + math.exp(-1 / tau)))
    assert moon_contrastive_loss(Z[:1], Z_GLOBAL[:1], Z_PREVIOUS[:1], tau).item() == pytest.approx(expected, rel=1e-12)


def test_without_negative_the_loss_is_exactly_zero_and_moon_is_cross_entropy() -> None:
    z = torch.randn(5, 4, requires_grad=True)
    con = moon_contrastive_loss(z, torch.randn(5, 4), None)
    assert con.item() == 0.0
    con.backward()
    assert torch.count_nonzero(z.grad) == 0
    logits, labels = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0])
    total = moon_loss(logits, labels, z, torch.randn(5, 4), None, mu=5.0)
    assert total.item() == F.cross_entropy(logits, labels).item()


def test_moon_loss_adds_mu_times_the_contrastive_term() -> None:
    logits, labels = torch.randn(2, 3, dtype=torch.float64), torch.tensor([2, 0])
    total = moon_loss(logits, labels, Z, Z_GLOBAL, Z_PREVIOUS, mu=0.1)
    expected = F.cross_entropy(logits, labels) + 0.1 * moon_contrastive_loss(Z, Z_GLOBAL, Z_PREVIOUS)
    assert total.item() == pytest.approx(expected.item(), rel=1e-12)


def test_loss_pulls_towards_global_and_away_from_previous() -> None:
    z = torch.tensor([[1.0, 0.2]], requires_grad=True)
    moon_contrastive_loss(z, torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 0.0]])).backward()
    assert z.grad[0, 1] < 0 < z.grad[0, 0]  # gradient descent raises the y (positive) and lowers the x (negative)


def test_representation_is_the_pooled_feature_entering_the_classifier() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", in_channels=3, num_classes=10).eval()
    x = torch.randn(3, 3, 8, 8)
    logits, z = local_logits_and_representation(model, x)
    head = model.stages["head"]
    pooled = torch.relu(head.bn(model.forward_to(x, "up"))).mean(dim=(2, 3))
    assert z.shape == (3, 64)
    torch.testing.assert_close(z, pooled)
    torch.testing.assert_close(logits, head.fc(pooled))
    assert z.requires_grad


def test_anchor_representation_runs_in_eval_mode_without_changing_the_model() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", in_channels=3, num_classes=10).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(4, 3, 8, 8)
    z = anchor_representation(model, x)
    assert model.training and not z.requires_grad
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key  # BN running statistics untouched
    torch.testing.assert_close(z, anchor_representation(model, x))  # deterministic: dropout off


def test_lenet_representation_is_its_84_dim_feature() -> None:
    model = build_model("lenet5", in_channels=1, num_classes=10)
    _, z = local_logits_and_representation(model, torch.randn(2, 1, 32, 32))
    assert z.shape == (2, 84)


@pytest.mark.parametrize(("mu", "tau", "key"), [(-0.1, 0.5, "moon-mu"), (1.0, 0.0, "moon-temperature")])
def test_settings_are_validated_naming_the_key(mu: float, tau: float, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        check_moon_settings(mu, tau)
