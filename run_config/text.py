"""``--run-config`` text, as ``flwr run`` reads it: ``key=value`` pairs separated by spaces.

Nothing here imports torch or the settings' schema, so the launcher's supervising process (``simulation.launch``)
can read and write the text without them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from run_config.settings import ConfigError


def parse_value(text: str) -> bool | int | float | str:
    """A value as Flower reads it: bool, int, float, else string (quotes removed)."""
    if text in ("true", "false"):
        return text == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_overrides(text: str) -> dict[str, Any]:
    """``'num-server-rounds=3 dataset="mnist"'`` -> ``{"num-server-rounds": 3, "dataset": "mnist"}``; a key given twice
    is refused (Flower would keep the last silently)."""
    overrides: dict[str, Any] = {}
    try:
        items = shlex.split(text)
    except ValueError as err:
        raise ConfigError(f"cannot read the run config {text!r}: {err}") from None
    for item in items:
        key, equals, value = item.partition("=")
        if not equals:
            raise ConfigError(f"run config item {item!r} is not key=value")
        if key in overrides:
            raise ConfigError(
                f"run config key {key!r} is given twice ({item!r} after {key}={overrides[key]!r}): keep one"
            )
        overrides[key] = parse_value(value)
    return overrides


def format_overrides(overrides: Mapping[str, object]) -> str:
    """``--run-config`` text: strings quoted, booleans lower-case, numbers as they are."""

    def fmt(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(value)

    return " ".join(f"{key}={fmt(value)}" for key, value in overrides.items())
