"""resolve_device: auto falls back to the CPU; a missing accelerator is named."""

from __future__ import annotations

import pytest
import torch

from client_app.device import resolve_device


def test_cpu_and_auto_on_a_machine_without_accelerators() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_without_a_gpu_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="device 'cuda' is set but torch sees no CUDA GPU"):
        resolve_device("cuda")


def test_unknown_device_is_refused() -> None:
    with pytest.raises(ValueError, match="device 'tpu' is not one of auto, cpu, cuda, mps"):
        resolve_device("tpu")
