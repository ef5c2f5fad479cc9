"""A model's identity as one string: two states with the same fingerprint are the same model, bit for bit.

Runs that are compared must start from one model; their summaries record this fingerprint of the start, and the
pretraining round's cache is keyed by the fingerprint of the weights it starts from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch


def state_fingerprint(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of a state dict's names, dtypes, shapes and values, in its order."""
    digest = hashlib.sha256()
    for key, tensor in state.items():
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{key}|{value.dtype}|{tuple(value.shape)}|".encode())
        digest.update(value.view(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()
