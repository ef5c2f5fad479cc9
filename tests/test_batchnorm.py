"""One rule for BatchNorm statistics (models/batchnorm.py): exact statistics of the given data with dropout off,
only in the layers asked for, and scoring never changes a model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models import build_model
from models.batchnorm import batchnorm_layers, settle_batchnorm
from models.training import evaluate


def test_statistics_are_those_of_the_inputs_with_dropout_off():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm2d(3))
    inputs = torch.randn(40, 3, 4, 4) * 2 + 1
    settle_batchnorm(model, inputs, batch_size=40)
    bn = model[1]
    assert torch.allclose(bn.running_mean, inputs.mean(dim=(0, 2, 3)), atol=1e-5)
    # the unbiased variance of the undropped inputs (dropout at 0.5 would double it)
    assert torch.allclose(bn.running_var, inputs.transpose(0, 1).reshape(3, -1).var(dim=1), rtol=1e-4)


def test_passes_of_near_equal_size_average_to_the_whole_sets_mean():
    model = nn.Sequential(nn.BatchNorm1d(2))
    inputs = torch.arange(14.0).reshape(7, 2)  # 7 rows in passes of at most 3: 3, 2, 2 rows
    settle_batchnorm(model, inputs, batch_size=3)
    means = [chunk.mean(dim=0) for chunk in torch.tensor_split(inputs, 3)]
    assert torch.allclose(model[0].running_mean, torch.stack(means).mean(dim=0))


def test_only_the_layers_within_change_and_flags_are_restored():
    torch.manual_seed(0)
    lower, upper = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), nn.Sequential(nn.BatchNorm2d(2))
    model = nn.Sequential(lower, upper)
    model.train()
    lower.eval()
    before = {k: v.clone() for k, v in lower.state_dict().items()}
    settle_batchnorm(model, torch.randn(8, 1, 6, 6), within=[upper])
    assert all(torch.equal(before[k], v) for k, v in lower.state_dict().items())
    assert upper[0].num_batches_tracked == 1 and not torch.equal(upper[0].running_mean, torch.zeros(2))
    assert model.training and upper.training and not lower.training and not lower[1].training
    assert upper[0].momentum == 0.1


def test_settling_twice_gives_the_same_statistics():
    torch.manual_seed(0)
    model = build_model("wrn-16-1", 1, 10, 0.3)
    inputs = torch.randn(64, 1, 32, 32)
    settle_batchnorm(model, inputs)
    first = {k: v.clone() for k, v in model.state_dict().items()}
    settle_batchnorm(model, inputs)
    assert all(torch.equal(first[k], v) for k, v in model.state_dict().items())


def test_a_single_value_per_channel_keeps_the_statistics():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settle_batchnorm(model, torch.randn(1, 3))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.training and model[1].momentum == 0.1


def test_no_inputs_change_nothing():
    model = nn.Sequential(nn.BatchNorm1d(2))
    settle_batchnorm(model, torch.empty(0, 2))
    assert torch.equal(model[0].running_mean, torch.zeros(2)) and model[0].num_batches_tracked == 0


def test_rescoring_an_unchanged_model_keeps_its_accuracy_and_its_state():
    """The measurement the issue asked for: scoring is read-only, so the same model scores the same every time
    (training-mode passes, which the old scoring of trained models kept, moved a model by 18 points)."""
    torch.manual_seed(0)
    model = build_model("wrn-16-1", 1, 4, 0.3)
    inputs, labels = torch.randn(96, 1, 32, 32), torch.randint(0, 4, (96,))
    settle_batchnorm(model, inputs)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    first = evaluate(model.eval(), inputs, labels, 32)
    second = evaluate(model.eval(), inputs, labels, 32)
    assert first == second
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_dropout_before_batchnorm_is_why_training_statistics_mislead():
    """The effect the rule removes: statistics gathered in training mode (dropout on) differ from the settled ones,
    and the settled ones are what an eval-mode pass over the same data normalises with."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Dropout(0.3), nn.BatchNorm2d(4, momentum=None))
    inputs = torch.randn(256, 1, 8, 8)
    with torch.no_grad():
        model.train()
        model(inputs)
    trained_var = model[2].running_var.clone()
    settle_batchnorm(model, inputs, batch_size=256)
    assert (trained_var > 1.3 * model[2].running_var).all()  # dropout's 1/(1-p) scaling inflates the variance


@pytest.mark.parametrize("name", ["wrn-16-1", "resnet8", "lenet5"])
def test_every_model_is_covered(name):
    model = build_model(name, 1, 10, 0.3)
    expected = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert batchnorm_layers([model]) == expected
