"""Which torch device a client computes on: ``device`` = ``auto`` | ``cpu`` | ``cuda`` | ``mps``.

``auto`` takes a CUDA GPU (a Jetson, a GPU server) when torch sees one, else Apple's MPS, else the CPU. A
SuperNode's ``--node-config device=...`` overrides the run's setting for that node alone.
"""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda", "mps")


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()


def resolve_device(name: str) -> torch.device:
    """The torch device for ``name``; ValueError when the named accelerator is not available here."""
    if name not in DEVICES:
        raise ValueError(f"device {name!r} is not one of {', '.join(DEVICES)}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' is set but torch sees no CUDA GPU on this node (is this a CPU build of torch?)")
    if name == "mps" and not _mps_available():
        raise ValueError("device 'mps' is set but torch's MPS backend is not available on this node")
    return torch.device(name)
