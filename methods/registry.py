"""Every method the ``method`` setting can name, and every local objective ``objective`` can name, found in the
``methods`` package: a module ``methods/<name>.py`` or a package ``methods/<name>/`` (its ``method.py``) that lists
its methods in ``METHODS``. Adding a method adds its module or package; nothing here changes.

Only the entry points (the ServerApp, the ClientApp, the launcher, experiments, benchmarks, scripts) read this
module; the framework below receives what it needs (``CATALOGUE``, a method's steps) from them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

import methods
from client_app.objective import CrossEntropy, ObjectiveFactory
from methods.base import ClientStep, Method, MethodContractError
from methods.common.generic_data import GenericDataSettings
from run_config import RunConfig
from run_config.catalogue import Catalogue, SettingValue
from run_config.defaults import default_config as _default_config
from run_config.overrides import config_with_overrides as _config_with_overrides
from run_config.parsing import default_values, keys_ignored_by, parse_run_config
from run_config.settings import namespace_of

#: Modules and packages of ``methods/`` that hold no method.
NOT_METHODS = frozenset({"base", "registry", "common"})


def method_modules() -> list[ModuleType]:
    """The module declaring each method module's or package's ``METHODS``, by name."""
    found = []
    for info in sorted(pkgutil.iter_modules(methods.__path__), key=lambda i: i.name):
        if info.name in NOT_METHODS:
            continue
        name = f"methods.{info.name}.method" if info.ispkg else f"methods.{info.name}"
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            missing = f"method package 'methods/{info.name}/' has no method.py listing its METHODS"
            raise MethodContractError(missing) from None
    return found


def declared_methods(module: ModuleType) -> tuple[Method, ...]:
    """``module.METHODS``, refused naming the module when it is missing or holds something else than ``Method``s."""
    declared = getattr(module, "METHODS", None)
    if not isinstance(declared, tuple | list) or not declared:
        raise MethodContractError(f"{module.__name__} declares no METHODS (a tuple of methods.base.Method)")
    for item in declared:
        if not isinstance(item, Method):
            raise MethodContractError(f"{module.__name__}.METHODS holds {item!r}, not a methods.base.Method")
    return tuple(declared)


def check_namespaces(method: Method) -> None:
    """Each of ``method``'s settings classes names the package of ``methods/`` that declares it as its namespace."""
    for cls in method.settings:
        package = cls.__module__.split(".")[1]
        if namespace_of(cls) != package:
            raise MethodContractError(
                f"method {method.name!r}: settings class {cls.__name__} has NAMESPACE {namespace_of(cls)!r}, not the "
                f"name of the package that declares it, {package!r}"
            )


def _registered() -> tuple[dict[str, Method], dict[str, str]]:
    by_name: dict[str, Method] = {}
    origin: dict[str, str] = {}
    for module in method_modules():
        for m in declared_methods(module):
            if m.name in by_name:
                raise MethodContractError(f"method {m.name!r} is declared twice ({module.__name__})")
            check_namespaces(m)
            by_name[m.name] = m
            origin[m.name] = module.__name__.split(".")[1]
    return by_name, origin


#: ORIGIN: method -> the module or package of ``methods/`` that declares it (``fedavg-rds`` -> ``fedavg``).
METHODS, ORIGIN = _registered()
OBJECTIVES: Mapping[str, ObjectiveFactory] = {
    "plain": CrossEntropy,
    **{name: factory for m in METHODS.values() for name, factory in m.objectives.items()},
}
#: Every method's client queries: message type -> the client's answer (client_app/app.py registers them).
QUERIES: Mapping[str, ClientStep] = {
    f"query.{name}": answer for m in METHODS.values() for name, answer in m.queries.items()
}
#: The axes a method's presets set, and their values when a method leaves one unset.
AXIS_DEFAULTS: Mapping[str, SettingValue] = {
    "freeze": "none",
    "data-selection": "all",
    "selection-fraction": 1.0,
    "objective": "plain",
    "pretrain": "dataset",
    "pretrain-round": False,
    "model": "wrn-16-1",
    "fraction-train": 1.0,
    "learning-rate": 0.1,
}
#: What the run configuration knows of the methods.
CATALOGUE = Catalogue(methods=METHODS, objectives=tuple(OBJECTIVES), axis_defaults=AXIS_DEFAULTS)


def method(name: str) -> Method:
    """The method called ``name``."""
    return METHODS[name]


def generic_dataset(config: RunConfig) -> str | None:
    """The other dataset the run's method draws its generic set D_g from (``common.generic-source = "dataset"``), if
    any."""
    if GenericDataSettings not in METHODS[config.method].settings:
        return None
    generic = config.settings(GenericDataSettings)
    return generic.generic_dataset if generic.generic_source == "dataset" else None


def parse_config(run_config: Mapping[str, Any]) -> RunConfig:
    """``run_config`` validated against every registered method (``run_config.parse_run_config``)."""
    return parse_run_config(run_config, CATALOGUE)


def for_run(values: Mapping[str, Any], keep: Iterable[str] = ()) -> dict[str, Any]:
    """``values`` with the settings of methods the run does not read (neither its ``method`` nor its objective's) set
    back to their defaults, except the keys in ``keep``: a base shared by several methods' runs gives each run what
    it reads, as a run refuses another method's setting."""
    defaults = default_values(CATALOGUE)
    ignored = keys_ignored_by(values, CATALOGUE) - set(keep)
    return {key: defaults[key] if key in ignored else value for key, value in values.items()}


def config_with_overrides(text: str) -> RunConfig:
    """The default run config with ``text``'s ``--run-config`` overrides, validated against every method."""
    return _config_with_overrides(text, CATALOGUE)


def default_config(**overrides: Any) -> RunConfig:
    """The default configuration with overrides given as snake_case keywords (for tools and tests)."""
    return _default_config(CATALOGUE, **overrides)
