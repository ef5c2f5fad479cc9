"""The run configuration: one typed, validated view of ``[tool.flwr.app.config]``.

The names below load their modules on first use (PEP 562), so that importing a light submodule (``run_config.text``,
``run_config.settings``) does not import the schema and, through the model and data modules it checks against,
torch: the launcher's supervising process needs only the text of the overrides.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from run_config.derived import build_model_for, data_cache, dataset_info, federated_split
    from run_config.parsing import all_settings, parse_run_config
    from run_config.schema import ConfigError, RunConfig, Setting

_HOMES = {
    "ConfigError": "run_config.schema",
    "RunConfig": "run_config.schema",
    "Setting": "run_config.schema",
    "all_settings": "run_config.parsing",
    "parse_run_config": "run_config.parsing",
    "build_model_for": "run_config.derived",
    "data_cache": "run_config.derived",
    "dataset_info": "run_config.derived",
    "federated_split": "run_config.derived",
}

__all__ = [
    "ConfigError",
    "RunConfig",
    "Setting",
    "all_settings",
    "build_model_for",
    "data_cache",
    "dataset_info",
    "federated_split",
    "parse_run_config",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'run_config' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
