"""Splitting a state into φ and θ and merging it back."""

from __future__ import annotations

import pytest
import torch

from models import WideResNet
from strategies.partial_model import merge_state, split_state


def test_split_then_merge_is_identity_in_state_dict_order() -> None:
    model = WideResNet(10, 1)
    state = model.state_dict()
    frozen, trained = split_state(state, model.upper_state_keys("mid"))
    assert set(frozen).isdisjoint(trained) and len(frozen) + len(trained) == len(state)
    assert all(k.startswith(("stages.stem", "stages.low", "stages.mid")) for k in frozen)
    merged = merge_state(frozen, trained, state.keys())
    assert list(merged) == list(state) and all(torch.equal(merged[k], state[k]) for k in state)


def test_merge_refuses_gaps_and_overlaps() -> None:
    with pytest.raises(KeyError, match="missing"):
        merge_state({"a": torch.ones(1)}, {}, ["a", "b"])
    with pytest.raises(KeyError, match="overlap"):
        merge_state({"a": torch.ones(1)}, {"a": torch.ones(1)}, ["a"])


def test_unknown_upper_key() -> None:
    with pytest.raises(KeyError):
        split_state({"a": torch.ones(1)}, ["b"])
