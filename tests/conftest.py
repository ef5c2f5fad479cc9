"""Shared fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from run_config import RunConfig, parse_run_config
from run_config.defaults import load_defaults


@pytest.fixture
def defaults() -> dict[str, Any]:
    return load_defaults()


def make_config(**overrides: Any) -> RunConfig:
    """The default configuration with kebab- or snake-case overrides."""
    values = load_defaults()
    values.update({key.replace("_", "-"): value for key, value in overrides.items()})
    return parse_run_config(values)
