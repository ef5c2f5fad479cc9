"""The faults ``fail-partitions`` injects into a client's training round (testing only)."""

from __future__ import annotations

import time

import torch

#: A hanging client answers this long after the server stopped waiting; its late reply is dropped.
HANG_PAST_TIMEOUT_SECONDS = 5.0


class InjectedFault(RuntimeError):
    """Raised by a client told to fail with ``fail-partitions``."""


def before_training(mode: str | None, round_timeout: float) -> None:
    """``raise`` raises; ``hang`` sleeps past the round timeout; anything else does nothing."""
    if mode == "raise":
        raise InjectedFault("fail-partitions: this client is set to raise")
    if mode == "hang":
        time.sleep(round_timeout + HANG_PAST_TIMEOUT_SECONDS)


def corrupt(state: dict[str, torch.Tensor], mode: str | None) -> dict[str, torch.Tensor]:
    """``garbage`` replaces every floating-point array by NaN; other modes leave the update as it is."""
    if mode != "garbage":
        return state
    return {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in state.items()}
