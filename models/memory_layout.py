"""The memory layout a model scores in: channels-last on x86 CPUs, where it is the faster one for the app's CNNs.

PyTorch's x86 CPU convolutions and max-pooling run faster on channels-last (NHWC) tensors than on the default NCHW:
a forward-only pass over 32×32 images took 0.70-0.90× the time for LeNet-5, ResNet-8 and WRN-16-1 on the project's
2-core x86 machine, one thread (``python -m benchmarks.scoring_layout``). The logits agree to float rounding (about
1e-6 apart at most, not bit for bit), so a model keeps one layout for all its scoring. Only the weights change
layout: inputs may come in either. Other devices (ARM CPUs such as a Raspberry Pi's, CUDA, MPS) keep the default
layout until the benchmark has measured channels-last there.
"""

from __future__ import annotations

import platform
from typing import TypeVar

import torch
from torch import nn

ModelT = TypeVar("ModelT", bound=nn.Module)

#: ``platform.machine()`` of the processors channels-last was measured faster on.
MEASURED_FASTER_ON = frozenset({"x86_64", "amd64"})


def scoring_layout(model: ModelT, device: torch.device) -> ModelT:
    """``model`` (on ``device``) with its 4-D weights in the layout its forward-only passes run fastest in there:
    channels-last on an x86 CPU, unchanged elsewhere. Converts in place and returns the model; ``load_state_dict``
    later copies values into the tensors and keeps their layout."""
    if device.type == "cpu" and platform.machine().lower() in MEASURED_FASTER_ON:
        return to_channels_last(model)
    return model


def to_channels_last(model: ModelT) -> ModelT:
    """``model`` with every 4-D parameter and buffer stored channels-last (what ``Module.to(memory_format=...)``
    does), in place."""
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.dim() == 4:
            tensor.data = tensor.data.contiguous(memory_format=torch.channels_last)
    return model
