"""Local SGD over a loss function, and evaluation."""

from __future__ import annotations

import pytest
import torch

from models.training import accuracy_per_class, cross_entropy_of, evaluate, logit_scores, predict_logits, train_epochs


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


def test_accuracy_per_class_by_hand_with_an_absent_class() -> None:
    # class 0: 2 of 3 right; class 1: 0 of 1; class 2: no sample; class 3: 2 of 2
    labels = torch.tensor([0, 0, 0, 1, 3, 3])
    predictions = torch.tensor([0, 1, 0, 3, 3, 3])
    assert accuracy_per_class(predictions, labels, 4) == [2 / 3, 0.0, None, 1.0]


def test_accuracy_per_class_lists_every_class_even_past_the_largest_label() -> None:
    assert accuracy_per_class(torch.tensor([1]), torch.tensor([1]), 3) == [None, 1.0, None]
    assert accuracy_per_class(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long), 2) == [None] * 2


def test_accuracy_per_class_weighted_by_class_sizes_is_the_accuracy() -> None:
    generator = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 5, (300,), generator=generator)
    logits = torch.randn(300, 5, generator=generator)
    per_class = accuracy_per_class(logits.argmax(dim=1), labels, 5)
    counts = torch.bincount(labels, minlength=5).tolist()
    weighted = sum(a * n for a, n in zip(per_class, counts, strict=True) if a is not None) / len(labels)
    assert weighted == pytest.approx(logit_scores(logits, labels)[1])


def test_predict_logits_equals_the_concatenated_batches_bit_for_bit() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)).eval()
    inputs = torch.randn(23, 7)
    with torch.no_grad():
        expected = torch.cat([model(inputs[i : i + 5]) for i in range(0, 23, 5)])
    out = predict_logits(model, inputs, 5)
    assert out.shape == (23, 3) and out.dtype == expected.dtype
    assert torch.equal(out, expected)
    assert torch.equal(predict_logits(model, inputs, 100), model(inputs).detach())


def test_predict_logits_of_no_inputs_is_an_empty_batch() -> None:
    model = torch.nn.Linear(4, 2)
    assert predict_logits(model, torch.empty(0, 4), 8).shape == (0, 2)
