"""A run's split of the training set over its clients, drawn at its start: a split that cannot be made is one
``ConfigError`` naming its keys."""

from __future__ import annotations

import pytest

from data.federated import partition_sizes
from methods.registry import parse_config
from run_config import federated_split
from run_config.data_check import check_split
from run_config.defaults import load_defaults
from run_config.schema import ConfigError, RunConfig


def synthetic(**overrides: object) -> RunConfig:
    """The synthetic set: 640 training samples after the server's share."""
    return parse_config({**load_defaults(), "dataset": "synthetic", **overrides})


def test_a_split_that_can_be_drawn_passes() -> None:
    config = synthetic()
    check_split(config, 4)
    assert sum(partition_sizes(federated_split(config), 4)) == 640


def test_a_dirichlet_draw_no_attempt_satisfies_names_the_keys_and_what_to_change() -> None:
    with pytest.raises(ConfigError) as raised:
        check_split(synthetic(**{"dirichlet-alpha": 0.1, "min-partition-size": 10}), 40)
    message = str(raised.value)
    assert message.startswith(
        "run config: cannot split 640 samples over 40 clients with dirichlet (dirichlet-alpha = 0.1, "
        "min-partition-size = 10): "
    )
    assert message.endswith("try again. Lower 'min-partition-size' or raise 'dirichlet-alpha'.")


def test_an_impossible_minimum_says_so_without_the_alpha_hint() -> None:
    with pytest.raises(ConfigError) as raised:
        check_split(synthetic(**{"min-partition-size": 20}), 40)
    assert (
        str(raised.value) == "run config: min-partition-size = 20 is impossible: 40 clients x 20 > 640 training samples"
    )
