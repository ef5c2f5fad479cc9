"""Local SGD over a loss function, and evaluation."""

from __future__ import annotations

import torch

from models.training import cross_entropy_of, evaluate, train_epochs


def test_training_fits_a_separable_problem() -> None:
    torch.manual_seed(0)
    x = torch.randn(200, 5)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(5, 2)
    before = evaluate(model, x, y, 64)
    train_epochs(
        cross_entropy_of(model), list(model.parameters()), x, y, epochs=20, batch_size=32, lr=0.1, momentum=0.5
    )
    loss, accuracy = evaluate(model, x, y, 64)
    assert loss < before[0] and accuracy > 0.95


def test_only_listed_parameters_change() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2))
    frozen = model[0].weight.detach().clone()
    train_epochs(
        cross_entropy_of(model),
        list(model[1].parameters()),
        torch.randn(20, 3),
        torch.randint(0, 2, (20,)),
        epochs=2,
        batch_size=5,
        lr=0.5,
    )
    assert torch.equal(model[0].weight, frozen)


def test_the_loss_function_is_what_is_minimised() -> None:
    """Any loss of a mini-batch trains: here one that pulls the bias towards 3."""
    model = torch.nn.Linear(2, 1)
    train_epochs(
        lambda x, y: ((model(x) - 3.0) ** 2).mean(),
        list(model.parameters()),
        torch.zeros(8, 2),
        torch.zeros(8, dtype=torch.long),
        epochs=50,
        batch_size=4,
        lr=0.1,
    )
    assert abs(model.bias.item() - 3.0) < 1e-2
