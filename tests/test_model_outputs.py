"""Reading intermediate outputs of our SplitModels: final Linear, maps at levels, shapes, eval mode."""

from __future__ import annotations

import pytest
import torch

from methods.model_outputs import (
    eval_mode,
    extract_in_batches,
    feature_map_shapes,
    final_linear,
    final_linear_keys,
    forward_with_maps,
)
from models import build_model


def test_final_linear_is_the_classifier() -> None:
    wrn, lenet = build_model("wrn-10-1", 3, 10), build_model("lenet5", 3, 10)
    assert final_linear(wrn) is wrn.stages["head"].fc
    assert final_linear(lenet) is lenet.stages["head"]
    assert final_linear_keys(lenet) == ["stages.head.weight", "stages.head.bias"]
    with pytest.raises(ValueError, match="no Linear layer"):
        final_linear(torch.nn.Conv2d(1, 1, 1))


def test_forward_with_maps_equals_forward_to_each_level() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 10).eval()
    x = torch.randn(2, 3, 8, 8)
    logits, maps = forward_with_maps(model, x, ["low", "up"])
    assert set(maps) == {"low", "up"}
    torch.testing.assert_close(maps["low"], model.forward_to(x, "low"))
    torch.testing.assert_close(maps["up"], model.forward_to(x, "up"))
    torch.testing.assert_close(logits, model(x))
    with pytest.raises(ValueError, match="unknown levels"):
        forward_with_maps(model, x, ["head"])


def test_shapes_and_extraction_leave_the_model_as_it_was() -> None:
    model = build_model("wrn-40-1", 3, 10).train()
    model.stages["low"].eval()  # a mixed-mode model must come back mixed
    before = {k: v.clone() for k, v in model.state_dict().items()}
    shapes = feature_map_shapes(model, (3, 32, 32), ["low", "mid", "up"])
    assert shapes == {"low": (16, 32, 32), "mid": (32, 16, 16), "up": (64, 8, 8)}  # thesis Table 6.1
    maps = extract_in_batches(model, torch.randn(3, 3, 8, 8), "mid", batch_size=2)
    assert maps.shape == (3, 32, 4, 4)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert model.training and model.stages["mid"].training and not model.stages["low"].training


def test_eval_mode_restores_modes_after_an_error() -> None:
    model = build_model("lenet5", 1, 10).train()
    with pytest.raises(RuntimeError), eval_mode(model):
        assert not model.training
        raise RuntimeError
    assert all(m.training for m in model.modules())
