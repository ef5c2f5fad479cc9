"""Shared fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from run_config.defaults import default_config, load_defaults

make_config = default_config  # the default configuration with snake_case overrides


@pytest.fixture
def defaults() -> dict[str, Any]:
    return load_defaults()
