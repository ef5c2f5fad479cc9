"""Parsing a run configuration against the methods a catalogue declares: the method's presets fill the ``"auto"``
axes, every value is checked (a bad one raises ``ConfigError`` naming the key and what is allowed), every method's
own settings are parsed, and the method's own ``check`` runs. A method's settings live under its namespace
(``fedprox.proximal-mu``); a key as it was before (``proximal-mu``) is refused, naming the new one."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from run_config.catalogue import Catalogue
from run_config.schema import RunConfig
from run_config.settings import AUTO, ConfigError, Setting, coerce, declared_settings, parse_settings


def _one_of_names(value: str, names: Iterable[str]) -> str | None:
    names = list(names)
    return None if value in names else f"must be one of {', '.join(repr(n) for n in names)}"


def all_settings(catalogue: Catalogue) -> tuple[Setting, ...]:
    """Every setting: the core ones, then each method's, in declaration order."""
    return declared_settings(RunConfig) + tuple(s for cls in catalogue.settings_classes for s in declared_settings(cls))


def moved_keys(catalogue: Catalogue) -> dict[str, str]:
    """A method's setting's key before settings had namespaces -> its key now (``proximal-mu`` ->
    ``fedprox.proximal-mu``)."""
    return {s.name: s.key for cls in catalogue.settings_classes for s in declared_settings(cls)}


def moved_key_message(key: str, catalogue: Catalogue) -> str | None:
    """``'proximal-mu' is now 'fedprox.proximal-mu'`` for a key a method's setting had, else None."""
    new = moved_keys(catalogue).get(key)
    if new is None:
        return None
    return f"run config '{key}' is now '{new}' (a method's settings live under the name of the package declaring them)"


def resolved_axes(values: Mapping[str, Any], catalogue: Catalogue) -> dict[str, Any]:
    """The ``auto`` axes (``freeze``, ``data-selection``, …) as the method sets them: its preset, else the axis's
    default; an axis given explicitly keeps its value."""
    presets = catalogue.presets(values["method"])
    return {
        s.attribute: presets[s.key] if values[s.key] == AUTO else values[s.key]
        for s in declared_settings(RunConfig)
        if s.auto
    }


def parse_run_config(run_config: Mapping[str, Any], catalogue: Catalogue) -> RunConfig:
    """Validate Flower's ``context.run_config`` against the methods of ``catalogue`` (with the method's ``check``)
    and return a ``RunConfig``; raise ``ConfigError``."""
    core = declared_settings(RunConfig)
    moved = moved_keys(catalogue)
    for key in run_config:
        if key in moved:
            raise ConfigError(moved_key_message(key, catalogue))
    missing = [s.key for s in core if s.key not in run_config]
    if missing:
        raise ConfigError(f"run config '{missing[0]}' is missing; add it to [tool.flwr.app.config]")
    method = run_config["method"]
    if (problem := _one_of_names(method, catalogue.methods)) is not None:
        raise ConfigError(f"run config 'method' = {method!r} is invalid: it {problem}")
    axes = resolved_axes(run_config, catalogue)
    if run_config.get("pretrain-round", AUTO) == AUTO and axes["pretrain"] == "none":
        axes["pretrain_round"] = False  # FedAvg w/o pretraining: neither step of the pretraining phase
    for spec in core:  # the axes' resolved values are checked like any other
        if spec.auto:
            axes[spec.attribute] = coerce(spec, axes[spec.attribute])
    if (problem := _one_of_names(axes["objective"], catalogue.objectives)) is not None:
        raise ConfigError(f"run config 'objective' = {axes['objective']!r} is invalid: it {problem}")
    extras: tuple[Any, ...] = tuple(parse_settings(cls, run_config) for cls in catalogue.settings_classes)
    config = dataclasses.replace(parse_settings(RunConfig, run_config, **axes), method_settings=extras)
    if config.resume and not config.run_name:
        raise ConfigError("run config 'resume' = true needs a 'run-name': the run folder holding the checkpoint")
    refuse_foreign_settings(config, catalogue)
    check_method(config, None, catalogue)
    return config


def unread_settings(method: str, objective: str, catalogue: Catalogue) -> list[type]:
    """The settings dataclasses a run does not read: all but its method's and those of the methods that bring its
    objective (FedProx's ``proximal-mu`` is read by any method run with ``objective = "proximal"``)."""
    read = set(catalogue.methods[method].settings)
    for declaration in catalogue.methods.values():
        if objective in declaration.objectives:
            read.update(declaration.settings)
    return [cls for cls in catalogue.settings_classes if cls not in read]


def keys_ignored_by(values: Mapping[str, Any], catalogue: Catalogue) -> set[str]:
    """The keys of ``values`` that are other methods' settings than the run's (its method's and its objective's)."""
    method = values["method"]
    objective = values.get("objective", AUTO)
    if objective == AUTO:
        objective = catalogue.presets(method)["objective"]
    unread = unread_settings(method, str(objective), catalogue)
    return {spec.key for cls in unread for spec in declared_settings(cls) if spec.key in values}


def refuse_foreign_settings(config: RunConfig, catalogue: Catalogue) -> None:
    """A setting of another method than the run's, changed from its default, is a mistake (the run would ignore it):
    refuse it, naming the key and the methods it belongs to."""
    for cls in unread_settings(config.method, config.objective, catalogue):
        instance: object = config.settings(cls)
        for spec in declared_settings(cls):
            if getattr(instance, spec.attribute) != spec.default:
                owners = " or ".join(repr(m.name) for m in catalogue.methods.values() if cls in m.settings)
                raise ConfigError(
                    f"run config {spec.key!r} is a setting of method {owners}, not of {config.method!r} (objective "
                    f"{config.objective!r}), which would ignore it: remove it, or run method {owners}"
                )


def check_method(config: RunConfig, client_sizes: Mapping[int, int] | None, catalogue: Catalogue) -> None:
    """The method's own checks (``Method.check``), with the samples each client holds when they are known."""
    check = catalogue.methods[config.method].check
    if check is not None:
        check(config, client_sizes)


def default_values(catalogue: Catalogue) -> dict[str, Any]:
    """Every setting's declared default, by key (what ``[tool.flwr.app.config]`` must hold)."""
    return {s.key: s.default for s in all_settings(catalogue)}
