"""Every method the ``method`` setting can name, and every local objective ``objective`` can name.

Adding a method: write its module in ``methods/`` (see ARCHITECTURE.md), then list it in ``_MODULES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from data.generic import GenericDataSettings
from methods import fedat_method, fedavg, fedfsc, fedft, fedkad_method, fedprox, fedsplit, moon
from methods.base import CrossEntropy, Method, ObjectiveFactory
from methods.kafal import method as kafal
from run_config import RunConfig

_MODULES = (fedavg, fedprox, fedft, kafal, moon, fedfsc, fedsplit, fedat_method, fedkad_method)

METHODS: Mapping[str, Method] = {m.name: m for module in _MODULES for m in module.METHODS}
OBJECTIVES: Mapping[str, ObjectiveFactory] = {
    "plain": CrossEntropy,
    **{name: factory for m in METHODS.values() for name, factory in m.objectives.items()},
}
#: Every method's client queries: message type -> the client's answer (client_app/app.py registers them).
QUERIES: Mapping[str, Any] = {f"query.{name}": answer for m in METHODS.values() for name, answer in m.queries.items()}
#: Every method's own settings dataclasses, in registration order.
METHOD_SETTINGS: tuple[type, ...] = tuple(dict.fromkeys(cls for m in METHODS.values() for cls in m.settings))
#: The axes a method's presets set, and their values when a method leaves one unset.
AXIS_DEFAULTS: Mapping[str, object] = {
    "freeze": "none",
    "data-selection": "all",
    "selection-fraction": 1.0,
    "objective": "plain",
    "pretrain": "dataset",
    "model": "wrn-16-1",
    "fraction-train": 1.0,
}


def method(name: str) -> Method:
    """The method called ``name``."""
    return METHODS[name]


def generic_dataset(config: RunConfig) -> str | None:
    """The other dataset the run's method draws its generic set D_g from (``generic-source = "dataset"``), if any."""
    if GenericDataSettings not in METHODS[config.method].settings:
        return None
    generic = config.settings(GenericDataSettings)
    return generic.generic_dataset if generic.generic_source == "dataset" else None
