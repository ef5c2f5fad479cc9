"""WRN-d-k, LeNet-5, PreAct-ResNet-8 and the 2NN: parameter counts, shapes, split levels and embeddings."""

from __future__ import annotations

import pytest
import torch

from models import MLP2NN, LeNet5, ResNet8, WideResNet, build_model, parse_model_name


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_wrn_16_1_parameter_count_matches_spec() -> None:
    # LeNet-5 for 32x32 inputs: "about 175k parameters for 3-channel input and 10 classes" (bias-free convolutions).
    assert n_params(WideResNet(16, 1, in_channels=3, num_classes=10)) == 175_066
    assert n_params(WideResNet(16, 1, in_channels=1, num_classes=10)) == 174_778


def test_wrn_28_10_matches_the_published_36_5m() -> None:
    assert n_params(WideResNet(28, 10)) == 36_479_194


def test_lenet5_parameter_count() -> None:
    assert n_params(LeNet5(in_channels=3, num_classes=10)) == 62_006


@pytest.mark.parametrize(
    ("level", "shape"), [("low", (2, 16, 32, 32)), ("mid", (2, 32, 16, 16)), ("up", (2, 64, 8, 8))]
)
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


@pytest.mark.parametrize("name", ["wrn-15-1", "wrn-16-0", "resnet18", "wrn-4-1", "resnet-8", "mlp"])
def test_bad_model_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown model"):
        parse_model_name(name)


def test_build_model_by_name() -> None:
    assert isinstance(build_model("wrn-10-1", 1, 4), WideResNet)
    assert build_model("lenet5", 1, 4)(torch.randn(2, 1, 32, 32)).shape == (2, 4)


def test_resnet8_parameter_counts() -> None:
    # The paper's "0.078M": the pre-activation ResNet-8 is WRN-10-1 without dropout.
    assert n_params(ResNet8(in_channels=3, num_classes=10)) == 77_850
    assert n_params(ResNet8(in_channels=3, num_classes=10)) == n_params(WideResNet(10, 1, 3, 10))
    # The authors' script builds post-activation BasicBlocks inside the pre-activation shell.
    assert n_params(ResNet8(in_channels=3, num_classes=10, block="post")) == 77_946
    assert n_params(ResNet8(in_channels=1, num_classes=10)) == 77_562


def test_resnet8_computes_what_wrn_10_1_without_dropout_computes() -> None:
    torch.manual_seed(0)
    resnet, wrn = ResNet8().eval(), WideResNet(10, 1, dropout=0.0).eval()
    wrn.load_state_dict(resnet.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(resnet(x), wrn(x))


@pytest.mark.parametrize("block", ["preact", "post"])
@pytest.mark.parametrize(
    ("level", "shape"), [("low", (2, 16, 32, 32)), ("mid", (2, 32, 16, 16)), ("up", (2, 64, 8, 8))]
)
def test_resnet8_split_levels(block: str, level: str, shape: tuple[int, ...]) -> None:
    model = ResNet8(block=block).eval()
    x = torch.randn(2, 3, 32, 32)
    assert tuple(model.forward_to(x, level).shape) == shape
    torch.testing.assert_close(model.forward_from(model.forward_to(x, level), level), model(x))


def test_resnet8_rejects_unknown_block() -> None:
    with pytest.raises(ValueError, match="preact, post"):
        ResNet8(block="bottleneck")


def test_mlp_2nn_is_784_200_200_10_on_padded_mnist() -> None:
    model = MLP2NN(in_channels=1, num_classes=10)
    assert n_params(model) == 199_210  # McMahan et al.'s 2NN
    assert [m.in_features for m in model.modules() if isinstance(m, torch.nn.Linear)] == [784, 200, 200]
    assert n_params(MLP2NN(in_channels=1, num_classes=10, crop=32)) == 1024 * 200 + 200 + 200 * 200 + 200 + 2010


def test_mlp_crop_undoes_the_mnist_padding_exactly() -> None:
    model = MLP2NN(in_channels=1, num_classes=10).eval()
    image = torch.randn(3, 1, 28, 28)
    padded = torch.nn.functional.pad(image, (2, 2, 2, 2))
    torch.testing.assert_close(model.forward_to(padded, "low"), image.flatten(1))
    torch.testing.assert_close(model(padded), model.forward_from(image.flatten(1), "low"))
    with pytest.raises(ValueError, match="crops 28x28 but got 20x20"):
        model(torch.randn(1, 1, 20, 20))


@pytest.mark.parametrize(
    ("name", "channels", "dim"),
    [("resnet8", 3, 64), ("mlp-2nn", 1, 200), ("lenet5", 1, 84), ("wrn-10-1", 3, 64)],
)
def test_embed_and_classify_gives_the_final_linear_input(name: str, channels: int, dim: int) -> None:
    model = build_model(name, channels, 7).eval()
    x = torch.randn(4, channels, 32, 32)
    embedding, logits = model.embed_and_classify(x)
    assert embedding.shape == (4, dim)
    torch.testing.assert_close(logits, model(x))
    torch.testing.assert_close(model.classify(embedding), logits)


def test_forward_with_levels_returns_each_level_and_the_logits() -> None:
    model = ResNet8().eval()
    x = torch.randn(2, 3, 32, 32)
    logits, levels = model.forward_with_levels(x)
    assert list(levels) == ["low", "mid", "up"]
    for level, features in levels.items():
        torch.testing.assert_close(features, model.forward_to(x, level))
    torch.testing.assert_close(logits, model(x))


def test_build_kafal_models_by_name() -> None:
    assert isinstance(build_model("resnet8", 3, 10), ResNet8)
    assert isinstance(build_model("mlp-2nn", 1, 10), MLP2NN)
    assert build_model("mlp-2nn", 1, 4)(torch.randn(2, 1, 32, 32)).shape == (2, 4)
