"""The defaults as Flower reads them (``[tool.flwr.app.config]`` and a table ``[tool.flwr.app.config.<namespace>]``
per method package, flattened into ``<namespace>.<key>``), and the two texts written from the settings'
declarations: those pyproject tables and the settings table of docs/configuration.md
(``python -m scripts.update_settings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib
from flwr.common.config import flatten_dict

from run_config.catalogue import Catalogue
from run_config.parsing import all_settings, parse_run_config
from run_config.schema import RunConfig
from run_config.settings import key_of

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def load_defaults(pyproject: Path = PYPROJECT) -> dict[str, Any]:
    """The app's default run config, exactly as Flower reads it (nested tables flattened into dotted keys)."""
    with pyproject.open("rb") as handle:
        return dict(flatten_dict(tomllib.load(handle)["tool"]["flwr"]["app"]["config"]))


def default_config(catalogue: Catalogue, **overrides: Any) -> RunConfig:
    """The default configuration with overrides given as keywords named as the settings' attributes (``seed``,
    ``proximal_mu`` for ``fedprox.proximal-mu``; for tools and tests)."""
    keys = {s.attribute: s.key for s in all_settings(catalogue)}
    values = load_defaults()
    values.update({keys.get(name, key_of(name)): value for name, value in overrides.items()})
    return parse_run_config(values, catalogue)


def toml_value(value: Any) -> str:
    """A default as TOML writes it (strings quoted, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def pyproject_config(catalogue: Catalogue) -> str:
    """The ``[tool.flwr.app.config]`` section, one line per core setting, then a table per namespace, one line per
    setting, from the declarations."""
    tables: dict[str, list[str]] = {}
    for spec in all_settings(catalogue):
        tables.setdefault(spec.table, []).append(f"{spec.name} = {toml_value(spec.default)}")
    return "\n\n".join("\n".join([table, *lines]) for table, lines in tables.items())


def markdown_table(catalogue: Catalogue) -> str:
    """The settings table of docs/configuration.md: key, default, meaning."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.key}` | `{toml_value(s.default)}` | {s.help} |" for s in all_settings(catalogue)]
    return "\n".join(rows)
