"""WRN-d-k and LeNet-5: parameter counts, shapes and split levels."""

from __future__ import annotations

import pytest
import torch

from models import LeNet5, WideResNet, build_model, parse_model_name


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_wrn_16_1_parameter_count_matches_spec() -> None:
    # SPEC §2: "about 175k parameters for 3-channel input and 10 classes" (bias-free convolutions).
    assert n_params(WideResNet(16, 1, in_channels=3, num_classes=10)) == 175_066
    assert n_params(WideResNet(16, 1, in_channels=1, num_classes=10)) == 174_778


def test_wrn_28_10_matches_the_published_36_5m() -> None:
    assert n_params(WideResNet(28, 10)) == 36_479_194


def test_lenet5_parameter_count() -> None:
    assert n_params(LeNet5(in_channels=3, num_classes=10)) == 62_006


@pytest.mark.parametrize(("level", "shape"), [("low", (2, 16, 32, 32)), ("mid", (2, 32, 16, 16)), ("up", (2, 64, 8, 8))])
def test_wrn_split_levels_have_spec_shapes(level: str, shape: tuple[int, ...]) -> None:
    model = WideResNet(16, 1).eval()
    x = torch.randn(2, 3, 32, 32)
    features = model.forward_to(x, level)
    assert tuple(features.shape) == shape
    torch.testing.assert_close(model.forward_from(features, level), model(x))


def test_wrn_width_scales_group_channels() -> None:
    model = WideResNet(10, 2).eval()
    assert model.forward_to(torch.randn(1, 3, 32, 32), "up").shape == (1, 128, 8, 8)


def test_freeze_at_mid_leaves_group3_and_head_about_75_percent() -> None:
    model = WideResNet(16, 1)
    upper = set(model.upper_state_keys("mid"))
    params = dict(model.named_parameters())
    trained = sum(p.numel() for name, p in params.items() if name in upper)
    assert all(key.startswith(("stages.up.", "stages.head.")) for key in upper)
    assert 0.70 < trained / n_params(model) < 0.80


def test_freeze_at_up_trains_the_classifier_only() -> None:
    keys = WideResNet(16, 1).upper_state_keys("up")
    assert {k.rsplit(".", 1)[0] for k in keys} == {"stages.head.bn", "stages.head.fc"}


def test_no_freeze_means_every_state_key_is_upper() -> None:
    model = LeNet5(1, 10)
    assert model.upper_state_keys("none") == list(model.state_dict())


def test_lenet_split_levels() -> None:
    model = LeNet5(1, 10).eval()
    x = torch.randn(3, 1, 32, 32)
    assert model.forward_to(x, "up").shape == (3, 84)
    torch.testing.assert_close(model.forward_from(model.forward_to(x, "low"), "low"), model(x))


def test_unknown_level_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="none, low, mid, up"):
        WideResNet(10, 1).forward_to(torch.randn(1, 3, 32, 32), "stem")


@pytest.mark.parametrize("name", ["wrn-15-1", "wrn-16-0", "resnet18", "wrn-4-1"])
def test_bad_model_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown model"):
        parse_model_name(name)


def test_build_model_by_name() -> None:
    assert isinstance(build_model("wrn-10-1", 1, 4), WideResNet)
    assert build_model("lenet5", 1, 4)(torch.randn(2, 1, 32, 32)).shape == (2, 4)
