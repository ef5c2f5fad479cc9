"""The memory layout a model scores in: channels-last on x86-64 CPUs, where it measured faster for the app's CNNs.

PyTorch's CPU convolutions and max-pooling ran faster on channels-last (NHWC) tensors than on the default NCHW: a
forward-only pass over 32×32 images took 0.5-0.9× the time for LeNet-5, ResNet-8 and WRN-16-1 on the project's
2-core machine (an AMD EPYC with AVX-512), one thread (``python -m benchmarks scoring-layout``); that is the one
x86-64 processor it has been measured on. The logits agree to float rounding (about 1e-6 apart at most, not bit for
bit), so a model keeps one layout for all its scoring. Only the weights change layout: inputs may come in either.
Other devices (ARM CPUs such as a Raspberry Pi's, CUDA, MPS) keep the default layout until the benchmark has
measured channels-last there.
"""

from __future__ import annotations

import platform
from typing import TypeVar

import torch
from torch import nn

ModelT = TypeVar("ModelT", bound=nn.Module)

#: ``platform.machine()`` of the processors channels-last was measured faster on.
MEASURED_FASTER_ON = frozenset({"x86_64"})


def to_scoring_layout(model: ModelT, device: torch.device) -> ModelT:
    """``model`` (on ``device``) with its 4-D weights in the layout its forward-only passes run fastest in there:
    channels-last on an x86 CPU, unchanged elsewhere. Converts in place and returns the model; ``load_state_dict``
    later copies values into the tensors and keeps their layout."""
    if device.type == "cpu" and platform.machine().lower() in MEASURED_FASTER_ON:
        return to_channels_last(model)
    return model


def to_channels_last(model: ModelT) -> ModelT:
    """``model`` with every 4-D parameter and buffer stored channels-last, in place: what
    ``Module.to(memory_format=torch.channels_last)`` does, which torch's type stubs do not declare. ``Tensor.to``
    restrides a tensor whose channel dimension has size 1 (the first convolution of a 1-channel model), which is
    both layouts at once and which ``contiguous`` leaves as it is: strides (25, 25, 5, 1) for a 6×1×5×5 weight
    make the convolution choose NCHW, (25, 1, 5, 1) make it choose channels-last."""
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.dim() == 4:
            tensor.data = tensor.data.to(memory_format=torch.channels_last)
    return model
