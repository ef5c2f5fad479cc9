"""Read the defaults from ``[tool.flwr.app.config]`` (for tests, tools and the README table)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from run_config.schema import SETTINGS, RunConfig, parse_run_config

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def load_defaults(pyproject: Path = PYPROJECT) -> dict[str, Any]:
    """The app's default run config, exactly as Flower reads it."""
    with pyproject.open("rb") as handle:
        return dict(tomllib.load(handle)["tool"]["flwr"]["app"]["config"])


def default_config(**overrides: Any) -> RunConfig:
    """The default configuration with overrides given as snake_case keywords (for tools and tests)."""
    values = load_defaults()
    values.update({key.replace("_", "-"): value for key, value in overrides.items()})
    return parse_run_config(values)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def markdown_table(defaults: dict[str, Any] | None = None) -> str:
    """The configuration table of the README: key, default, meaning."""
    defaults = defaults if defaults is not None else load_defaults()
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.key}` | `{_fmt(defaults[s.key])}` | {s.help} |" for s in SETTINGS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
