"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from methods.registry import default_config
from run_config.defaults import load_defaults

make_config = default_config  # the default configuration with snake_case overrides


@pytest.fixture
def defaults() -> dict[str, Any]:
    return load_defaults()


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory) -> Path:
    """One pretraining cache for the whole test session (the learns-tests share their pretrained start)."""
    return tmp_path_factory.mktemp("pretrained")
