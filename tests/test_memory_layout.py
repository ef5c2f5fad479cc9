"""The scoring layout: channels-last weights on an x86 CPU, the default elsewhere; the same logits to float rounding; a
state loaded later keeps the layout and its values."""

from __future__ import annotations

import platform

import pytest
import torch

import models.memory_layout as memory_layout
import strategies.central_evaluation as central
from methods.registry import parse_config
from models.device import available_devices
from models.memory_layout import to_channels_last, to_scoring_layout
from models.registry import build_model
from models.training import predict_logits
from run_config.defaults import load_defaults

DEVICES = [str(device) for device in available_devices()]


def _conv_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.dim() == 4]


def _is_channels_last(weight: torch.Tensor) -> bool:
    """Stored channels-last, with the channel stride 1 even where there is one channel (which is then also NCHW by
    ``is_contiguous``, and which a convolution reads as NCHW unless its stride says otherwise)."""
    return weight.is_contiguous(memory_format=torch.channels_last) and weight.stride(1) == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, channels", [("lenet5", 1), ("resnet8", 3), ("wrn-10-1", 1)])
def test_the_scoring_layout_gives_the_same_logits_and_predictions(device: str, name: str, channels: int) -> None:
    """Logits within 1e-5 of the default layout's (float rounding of another kernel order), the same predictions."""
    where = torch.device(device)
    torch.manual_seed(0)
    plain = build_model(name, channels, 10).to(where).eval()
    scoring = build_model(name, channels, 10).to(where)
    scoring.load_state_dict(plain.state_dict())
    scoring = to_scoring_layout(scoring, where).eval()
    images = torch.randn(300, channels, 32, 32, device=where)
    expected, got = predict_logits(plain, images, 64), predict_logits(scoring, images, 64)
    assert torch.allclose(got, expected, rtol=0, atol=1e-5)
    assert torch.equal(got.argmax(dim=1), expected.argmax(dim=1))
    channels_last = [_is_channels_last(w) for w in _conv_weights(scoring)]
    default = [w.is_contiguous() for w in _conv_weights(scoring)]
    if where.type == "cpu" and platform.machine().lower() in memory_layout.MEASURED_FASTER_ON:
        assert all(channels_last)
    else:
        assert all(default)


def test_a_loaded_state_keeps_the_layout_and_its_values() -> None:
    model = to_channels_last(build_model("lenet5", 1, 10))
    state = {k: torch.randn_like(v) for k, v in build_model("lenet5", 1, 10).state_dict().items()}
    model.load_state_dict(state)
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key])
        if value.dim() == 4:
            assert _is_channels_last(value)


@pytest.mark.skipif(platform.machine().lower() not in memory_layout.MEASURED_FASTER_ON, reason="an x86 CPU")
def test_the_central_evaluators_model_scores_in_the_layout_of_its_device() -> None:
    config = parse_config({**load_defaults(), "dataset": "synthetic", "model": "lenet5", "freeze": "none"})
    evaluation = central.CentralEvaluation(config, {}, torch.device("cpu"))
    assert all(_is_channels_last(w) for w in _conv_weights(evaluation.model))


@pytest.mark.parametrize("channels", [1, 3])
def test_the_first_convolution_computes_channels_last_on_nchw_images(channels: int) -> None:
    """The first convolution's output is channels-last, also for 1-channel images, whose 6×1×5×5 weight is both
    layouts at once: what the layout is for (its max-pooling is the costliest step of LeNet-5's scoring)."""
    model = to_channels_last(build_model("lenet5", channels, 10))
    first_convolution = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    output = first_convolution(torch.randn(4, channels, 32, 32))
    assert output.is_contiguous(memory_format=torch.channels_last) and not output.is_contiguous()


def test_an_arm_cpu_keeps_the_default_layout(monkeypatch) -> None:
    """Channels-last is measured faster on x86 only: an ARM CPU (a Raspberry Pi, a Jetson's cores) is left as it is."""
    monkeypatch.setattr(memory_layout.platform, "machine", lambda: "aarch64")
    model = to_scoring_layout(build_model("lenet5", 3, 10), torch.device("cpu"))
    assert all(w.is_contiguous() for w in _conv_weights(model))
