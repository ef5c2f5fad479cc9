"""Reading files written with ``torch.save`` (checkpoints, pretrained weights) with a clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def load_torch_file(path: Path) -> Any:
    """``torch.load`` restricted to tensors and plain containers; ValueError saying why a file is unusable."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a corrupt file surfaces as any of a dozen exception types
        first_line = (str(err).strip().splitlines() or [""])[0][:160]
        raise ValueError(f"{path} is not a readable torch file ({type(err).__name__}: {first_line})") from None


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A model state dict; ValueError if the file holds anything else."""
    state = load_torch_file(path)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} holds a {type(state).__name__}, not a state dict of tensors")
    return state
