"""``--run-config`` text as the launcher reads it (``run_config/text.py``)."""

from __future__ import annotations

import pytest

from run_config.settings import ConfigError
from run_config.text import format_overrides, parse_overrides


def test_values_are_typed_as_flower_types_them():
    assert parse_overrides("num-server-rounds=3 dataset='mnist' augment=true temperature=0.1") == {
        "num-server-rounds": 3,
        "dataset": "mnist",
        "augment": True,
        "temperature": 0.1,
    }


def test_a_key_given_twice_is_refused_naming_it():
    with pytest.raises(ConfigError, match="run config key 'num-server-rounds' is given twice"):
        parse_overrides("num-server-rounds=3 seed=1 num-server-rounds=5")


def test_an_item_without_equals_is_refused():
    with pytest.raises(ConfigError, match="'seed' is not key=value"):
        parse_overrides("seed")


def test_formatted_text_reads_back():
    overrides = {"run-name": 'a "b"', "seed": 2, "resume": False}
    assert parse_overrides(format_overrides(overrides)) == overrides
