"""MOON: the model-contrastive loss against a hand computation, the representation it reads, and the objective
(positive the received model, negative the client's previous local model kept in its node state)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from flwr.app import RecordDict

from client_app.objective import LocalTraining
from methods.moon import (
    PREVIOUS_MODEL,
    Contrastive,
    anchor_representation,
    moon_contrastive_loss,
    moon_loss,
)
from methods.registry import parse_config
from models import SplitModel, build_model
from run_config import ConfigError
from tests.conftest import make_config

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
    z, logits = model.embed_and_classify(x)
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
    z, _ = model.embed_and_classify(torch.randn(2, 1, 32, 32))
    assert z.shape == (2, 84)


@pytest.mark.parametrize(("key", "value"), [("moon.moon-mu", -0.1), ("moon.moon-temperature", 0.0)])
def test_settings_are_validated_naming_the_key(defaults: dict, key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_config({**defaults, "method": "moon", key: value})


def test_moon_preset_is_fedavg_with_the_contrastive_objective(defaults: dict) -> None:
    config = parse_config({**defaults, "method": "moon"})
    assert (config.freeze, config.data_selection, config.objective) == ("none", "all", "contrastive")


def objective(model: SplitModel, state: RecordDict, level: str = "none", mu: float = 0.5, tau: float = 0.5):
    config = make_config(method="moon", moon_mu=mu, moon_temperature=tau, freeze=level)
    model.set_frozen(level)
    params = model.upper_parameters(level)

    def lower(x: torch.Tensor) -> torch.Tensor:
        return x if level == "none" else model.forward_to(x, level)

    def forward(x: torch.Tensor) -> torch.Tensor:
        return model.forward_from(lower(x), level)

    return Contrastive(LocalTraining(model, level, params, forward, config, state, lower))


def by_hand(z: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor | None, tau: float) -> torch.Tensor:
    """ℓ_con per sample, written out: −log(e^{s⁺/τ} / (e^{s⁺/τ} + e^{s⁻/τ}))."""
    cos = [torch.dot(a, b) / (a.norm() * b.norm()) for a, b in zip(z, positive)]
    if negative is None:
        return torch.zeros(len(z))
    neg = [torch.dot(a, b) / (a.norm() * b.norm()) for a, b in zip(z, negative)]
    return torch.stack(
        [-torch.log(torch.exp(p / tau) / (torch.exp(p / tau) + torch.exp(n / tau))) for p, n in zip(cos, neg)]
    )


def test_the_objective_is_ce_alone_at_a_first_participation_then_uses_the_kept_model_as_negative() -> None:
    torch.manual_seed(0)
    model = build_model("lenet5", in_channels=1, num_classes=10).double()
    x, y = torch.randn(6, 1, 32, 32, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 4, 5])
    state = RecordDict()
    first = objective(model, state)
    received = {k: v.clone() for k, v in model.state_dict().items()}
    torch.testing.assert_close(first.loss(x, y), F.cross_entropy(model(x), y))  # no negative: ℓ_con = 0
    with torch.no_grad():  # the round's training moves the model
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    first.finish()
    kept = state.array_records[PREVIOUS_MODEL].to_torch_state_dict()
    assert all(torch.equal(kept[k], v) for k, v in model.state_dict().items())

    # Next round: the server sends a new global model; the kept one is the negative.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    global_state = {k: v.clone() for k, v in model.state_dict().items()}
    second = objective(model, state, mu=0.5, tau=0.5)
    with torch.no_grad():  # a local step away from the global model
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    z, logits = model.embed_and_classify(x)
    anchors = {}
    for name, weights in (("global", global_state), ("previous", kept)):
        other = build_model("lenet5", in_channels=1, num_classes=10).double()
        other.load_state_dict(weights)
        anchors[name] = other.eval().embed_and_classify(x)[0].detach()
    expected = F.cross_entropy(logits, y) + 0.5 * by_hand(z, anchors["global"], anchors["previous"], 0.5).mean()
    torch.testing.assert_close(second.loss(x, y), expected)
    assert not torch.equal(kept["stages.head.weight"], received["stages.head.weight"])


def test_with_a_frozen_part_the_representation_and_the_kept_model_are_thetas() -> None:
    torch.manual_seed(1)
    model = build_model("wrn-10-1", in_channels=3, num_classes=10, dropout=0.0).double()
    x, y = torch.randn(4, 3, 8, 8, dtype=torch.float64), torch.tensor([1, 2, 3, 4])
    state = RecordDict()
    first = objective(model, state, level="mid")
    first.finish()
    kept = state.array_records[PREVIOUS_MODEL]
    assert sorted(kept.keys()) == sorted(model.upper_state_keys("mid"))
    with torch.no_grad():
        for p in model.upper_parameters("mid"):
            p.add_(0.05 * torch.randn_like(p))
    received = copy.deepcopy(model)
    second = objective(model, state, level="mid", mu=2.0, tau=0.3)
    h = model.forward_to(x, "mid")
    previous = copy.deepcopy(model)
    previous.load_state_dict(kept.to_torch_state_dict(), strict=False)
    z_previous = previous.eval().embed_and_classify(h, "mid")[0]
    z_global = received.eval().embed_and_classify(h, "mid")[0]
    z, logits = model.embed_and_classify(h, "mid")  # θ in train mode (batch statistics), as in training
    expected = F.cross_entropy(logits, y) + 2.0 * by_hand(z, z_global, z_previous, 0.3).mean()
    torch.testing.assert_close(second.loss(x, y), expected)


def test_a_model_kept_for_another_theta_is_not_used_as_the_negative() -> None:
    model = build_model("lenet5", in_channels=1, num_classes=10)
    state = RecordDict()
    objective(model, state, level="up").finish()  # kept: the head only
    assert objective(model, state, level="none").previous_model is None


@pytest.mark.parametrize(("name", "channels", "size"), [("lenet5", 1, 32), ("resnet8", 3, 32), ("mlp-2nn", 1, 32)])
def test_moon_and_the_fewshot_classifier_read_every_model_family_the_same_way(
    name: str, channels: int, size: int
) -> None:
    """Every model family (WRN is covered above): z is what the final Linear (classifier_keys) reads, so MOON's
    representation and FedFSC's few-shot classifier are defined for it, and the objective matches the hand sum."""
    torch.manual_seed(2)
    model = build_model(name, in_channels=channels, num_classes=10).double().eval()
    x, y = torch.randn(3, channels, size, size, dtype=torch.float64), torch.tensor([0, 4, 9])
    z, logits = model.embed_and_classify(x)
    weight, bias = (model.state_dict()[key] for key in model.classifier_keys())
    torch.testing.assert_close(logits, model(x))
    torch.testing.assert_close(logits, F.linear(z, weight, bias))

    model.train()  # as in local training: BN layers use batch statistics, the anchors run in eval mode
    state = RecordDict()
    objective(model, state).finish()  # first participation: keeps this model as the next negative
    previous = copy.deepcopy(model).eval()
    with torch.no_grad():  # the next round's global model
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    moon = objective(model, state, mu=0.7, tau=0.5)
    z_global = copy.deepcopy(model).eval().embed_and_classify(x)[0]
    z_previous = previous.embed_and_classify(x)[0]
    with torch.no_grad():  # a local step away from the global model
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    z, logits = model.embed_and_classify(x)
    expected = F.cross_entropy(logits, y) + 0.7 * by_hand(z, z_global, z_previous, 0.5).mean()
    torch.testing.assert_close(moon.loss(x, y), expected)
