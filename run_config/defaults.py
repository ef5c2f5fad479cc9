"""The defaults as Flower reads them (``[tool.flwr.app.config]``), and the two texts written from the settings'
declarations: that pyproject section and the settings table of docs/configuration.md
(``python -m scripts.update_settings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib

from run_config.catalogue import Catalogue
from run_config.parsing import all_settings, default_values, parse_run_config
from run_config.schema import RunConfig

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def load_defaults(pyproject: Path = PYPROJECT) -> dict[str, Any]:
    """The app's default run config, exactly as Flower reads it."""
    with pyproject.open("rb") as handle:
        return dict(tomllib.load(handle)["tool"]["flwr"]["app"]["config"])


def default_config(catalogue: Catalogue, **overrides: Any) -> RunConfig:
    """The default configuration with overrides given as snake_case keywords (for tools and tests)."""
    values = load_defaults()
    values.update({key.replace("_", "-"): value for key, value in overrides.items()})
    return parse_run_config(values, catalogue)


def toml_value(value: Any) -> str:
    """A default as TOML writes it (strings quoted, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def pyproject_config(catalogue: Catalogue) -> str:
    """The ``[tool.flwr.app.config]`` section, one line per setting, from the declarations."""
    return "\n".join(
        ["[tool.flwr.app.config]"]
        + [f"{key} = {toml_value(value)}" for key, value in default_values(catalogue).items()]
    )


def markdown_table(catalogue: Catalogue) -> str:
    """The settings table of docs/configuration.md: key, default, meaning."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.key}` | `{toml_value(s.default)}` | {s.help} |" for s in all_settings(catalogue)]
    return "\n".join(rows)
