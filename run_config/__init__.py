"""The run configuration: one typed, validated view of ``[tool.flwr.app.config]``."""

from run_config.derived import build_model_for, data_cache, federated_split
from run_config.schema import ConfigError, RunConfig, Setting, all_settings, parse_run_config

__all__ = [
    "ConfigError",
    "RunConfig",
    "Setting",
    "all_settings",
    "build_model_for",
    "data_cache",
    "federated_split",
    "parse_run_config",
]
