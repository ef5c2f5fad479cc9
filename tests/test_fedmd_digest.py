"""benchmarks/fedmd_digest.py's pieces on toy inputs: the consensus's score and the labelled digest."""

from __future__ import annotations

import torch

from benchmarks.fedmd_digest import consensus_margin, ensemble_accuracy, label_digest
from methods.fedkad.distillation import Recipe


def test_ensemble_accuracy_scores_the_argmax_of_the_mean_logits() -> None:
    labels = torch.tensor([0, 1, 1])
    a = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])  # right, right, wrong
    b = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 4.0]])  # wrong, right, right
    assert ensemble_accuracy([a], labels) == 2 / 3
    assert ensemble_accuracy([a, b], labels) == 1.0  # the mean is right where either is more confident


def test_label_digest_fits_the_labels_with_the_recipe() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(64, 4)
    labels = (inputs[:, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    recipe = Recipe("adam", 1e-2, epochs=20, batch_size=16)
    fit = label_digest(model, inputs, labels, recipe, torch.Generator().manual_seed(0))
    assert len(fit.kd) == 20 and fit.prototype is None
    assert fit.kd[-1] < fit.kd[0]
    model.eval()
    assert float((model(inputs).argmax(1) == labels).float().mean()) > 0.9
    # the settle leaves BatchNorm's running mean at the draw's mean of its inputs
    assert torch.allclose(model[1].running_mean, model[0](inputs).mean(0), atol=1e-5)


def test_consensus_margin_over_rounds() -> None:
    rows = [
        {"consensus_test": 0.6, "clients_mean": 0.5, "clients_best": 0.7},
        {"consensus_test": 0.4, "clients_mean": 0.5, "clients_best": 0.6},
    ]
    assert consensus_margin({"by_round": rows}) == {
        "consensus_minus_clients_mean": 0.0,
        "consensus_minus_best_client": -15.0,
        "rounds_consensus_below_clients_mean": 1,
    }
