"""Local SGD, the proximal term and evaluation."""

from __future__ import annotations

import torch

from models.training import evaluate, proximal_term, train_epochs


def test_proximal_term_gradient_is_w_minus_anchor() -> None:
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    anchor = torch.tensor([0.5, 0.5, 0.5])
    term = proximal_term([w], [anchor])
    assert term.item() == 0.5 * (0.25 + 6.25 + 6.25)
    term.backward()
    torch.testing.assert_close(w.grad, w.detach() - anchor)


def test_training_fits_a_separable_problem() -> None:
    torch.manual_seed(0)
    x = torch.randn(200, 5)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(5, 2)
    before = evaluate(model, x, y, 64)
    train_epochs(model, list(model.parameters()), x, y, epochs=20, batch_size=32, lr=0.1, momentum=0.5)
    loss, accuracy = evaluate(model, x, y, 64)
    assert loss < before[0] and accuracy > 0.95


def test_proximal_mu_keeps_weights_near_the_start() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(100, 4), torch.randint(0, 2, (100,))

    def drift(mu: float) -> float:
        model = torch.nn.Linear(4, 2)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
        train_epochs(model, list(model.parameters()), x, y, epochs=10, batch_size=10, lr=0.1, proximal_mu=mu,
                     generator=torch.Generator().manual_seed(1))
        return model.weight.norm().item()

    assert drift(5.0) < 0.5 * drift(0.0)


def test_only_listed_parameters_change() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2))
    frozen = model[0].weight.detach().clone()
    train_epochs(model, list(model[1].parameters()), torch.randn(20, 3), torch.randint(0, 2, (20,)),
                 epochs=2, batch_size=5, lr=0.5)
    assert torch.equal(model[0].weight, frozen)
