"""What the run configuration needs to know of the methods, handed in by the entry points.

The run configuration sits below the methods: it imports none of them. The ServerApp, the ClientApp, the launcher
and the tools read the methods from ``methods/registry.py`` and pass its ``CATALOGUE`` to ``parse_run_config``;
that catalogue says which methods and objectives exist, which settings each method declares, the values its presets
give the ``"auto"`` axes, and its own checks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from run_config.schema import RunConfig

#: A setting's value as Flower's run config holds it.
SettingValue = str | int | float | bool


class SettingsCheck(Protocol):
    """A method's checks of its settings together: called with None whenever a configuration is parsed, and at the
    run's start with the samples each connected client holds (partition id -> count); raises ``ConfigError``."""

    def __call__(self, config: RunConfig, client_sizes: Mapping[int, int] | None, /) -> None: ...


class MethodDeclaration(Protocol):
    """What a method declares to the run configuration (``methods.base.Method`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def presets(self) -> Mapping[str, SettingValue]: ...

    @property
    def settings(self) -> tuple[type, ...]: ...

    @property
    def objectives(self) -> Mapping[str, object]: ...

    @property
    def check(self) -> SettingsCheck | None: ...


@dataclass(frozen=True, eq=False)
class Catalogue:
    """The methods and local objectives a run can name, and the axes' values when a method's presets leave one
    unset. One catalogue is one registry: compared (and hashed) by identity."""

    methods: Mapping[str, MethodDeclaration]
    objectives: tuple[str, ...]
    axis_defaults: Mapping[str, SettingValue]

    @functools.cached_property
    def settings_classes(self) -> tuple[type, ...]:
        """Every method's own settings dataclasses, in registration order, each once."""
        return tuple(dict.fromkeys(cls for m in self.methods.values() for cls in m.settings))

    def presets(self, method: str) -> dict[str, SettingValue]:
        """The axes' values for ``method``: its presets over the defaults."""
        return {**self.axis_defaults, **self.methods[method].presets}
