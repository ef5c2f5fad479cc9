"""FedProx: the proximal term, its objective, and its presets."""

from __future__ import annotations

import torch
from flwr.app import RecordDict

from client_app.objective import LocalTraining
from methods.fedprox import FedProxSettings, Proximal, proximal_term
from models.training import train_epochs
from tests.conftest import make_config


def test_proximal_term_gradient_is_w_minus_anchor() -> None:
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    anchor = torch.tensor([0.5, 0.5, 0.5])
    term = proximal_term([w], [anchor])
    assert term.item() == 0.5 * (0.25 + 6.25 + 6.25)
    term.backward()
    torch.testing.assert_close(w.grad, w.detach() - anchor)


def proximal_objective(model: torch.nn.Module, mu: float) -> Proximal:
    config = make_config(method="fedprox", proximal_mu=mu)
    params = list(model.parameters())
    return Proximal(LocalTraining(model, "none", params, model, config, RecordDict(), lambda x: x))


def test_the_objective_is_cross_entropy_plus_mu_times_the_term_from_the_round_start() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    objective = proximal_objective(model, 0.5)
    start = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model.weight.add_(1.0)
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    expected = torch.nn.functional.cross_entropy(model(x), y) + 0.5 * proximal_term(list(model.parameters()), start)
    torch.testing.assert_close(objective.loss(x, y), expected)


def test_proximal_mu_keeps_weights_near_the_start() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(100, 4), torch.randint(0, 2, (100,))

    def drift(mu: float) -> float:
        model = torch.nn.Linear(4, 2)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
        objective = proximal_objective(model, mu)
        train_epochs(
            objective.loss,
            list(model.parameters()),
            x,
            y,
            epochs=10,
            batch_size=10,
            lr=0.1,
            generator=torch.Generator().manual_seed(1),
        )
        return model.weight.norm().item()

    assert drift(5.0) < 0.5 * drift(0.0)


def test_presets_and_composition() -> None:
    fedprox = make_config(method="fedprox")
    assert (fedprox.freeze, fedprox.data_selection, fedprox.objective) == ("none", "all", "proximal")
    assert fedprox.settings(FedProxSettings).proximal_mu == 0.01
    rds = make_config(method="fedprox-rds")
    assert (rds.data_selection, rds.selection_fraction, rds.objective) == ("random", 0.1, "proximal")
    composed = make_config(method="fedft-eds", objective="proximal", proximal_mu=0.1)
    assert (composed.freeze, composed.data_selection, composed.objective) == ("mid", "entropy", "proximal")
    assert make_config(method="fedft-eds").objective == "plain"
