"""Reading intermediate outputs of our SplitModels: final Linear, maps at levels, shapes, eval mode."""

from __future__ import annotations

import pytest
import torch

from models import build_model
from models.outputs import (
    eval_mode,
    extract_in_batches,
    feature_map_shapes,
    forward_with_maps,
    penultimate_features,
)


def test_classifier_keys_name_the_final_linear_layer() -> None:
    wrn, lenet = build_model("wrn-10-1", 3, 10), build_model("lenet5", 3, 10)
    assert wrn.classifier_keys() == ["stages.head.fc.weight", "stages.head.fc.bias"]
    assert lenet.classifier_keys() == ["stages.head.weight", "stages.head.bias"]


@pytest.mark.parametrize("level", ["none", "low", "mid", "up"])
def test_embed_and_classify_from_a_level_continues_the_forward_pass(level: str) -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 10).eval()
    x = torch.randn(2, 3, 8, 8)
    embedding, logits = model.embed_and_classify(model.forward_to(x, level), level)
    torch.testing.assert_close(logits, model(x))
    torch.testing.assert_close(embedding, model.embed_and_classify(x)[0])
    assert embedding.shape == (2, 64)


def test_penultimate_features_are_read_in_eval_mode_and_leave_the_mode() -> None:
    torch.manual_seed(0)
    model = build_model("lenet5", 1, 10).train()
    x = torch.randn(5, 1, 32, 32)
    features = penultimate_features(model, x, batch_size=2)
    assert model.training and features.shape == (5, 84)
    torch.testing.assert_close(model.eval().stages["head"](features), model(x))


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
