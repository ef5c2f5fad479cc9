"""The default run config with ``--run-config`` overrides applied and validated."""

from __future__ import annotations

from run_config.catalogue import Catalogue
from run_config.defaults import load_defaults
from run_config.parsing import moved_key_message, parse_run_config
from run_config.schema import ConfigError, RunConfig, unknown_key_message
from run_config.text import parse_overrides


def config_with_overrides(text: str, catalogue: Catalogue) -> RunConfig:
    """The default run config with ``text``'s overrides, validated; ConfigError naming the key (its new key for one
    a method's setting had before settings had namespaces, the closest known ones for a key the app does not have)."""
    values = load_defaults()
    for key, value in parse_overrides(text).items():
        if key not in values:
            raise ConfigError(moved_key_message(key, catalogue) or unknown_key_message(key, values))
        values[key] = value
    return parse_run_config(values, catalogue)
