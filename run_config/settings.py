"""How a setting is declared, once: a dataclass field carrying its default, help text and check.

    temperature: float = setting(0.1, "ρ of the hardened softmax for entropy ranking (< 1 hardens).", positive)

The attribute name in snake_case is the key in kebab-case (``temperature``, ``selection-fraction``); its
annotation is the type; ``[tool.flwr.app.config]`` in pyproject.toml and the settings table of
docs/configuration.md are written from these declarations (``python -m scripts.update_settings``; a test keeps them
current). The app's core settings are ``run_config.schema.RunConfig``, at the top level; a method declares its own in a
dataclass of its package with a ``NAMESPACE`` (its package's name), which prefixes their keys
(``fedprox.proximal-mu``): Flower flattens the table ``[tool.flwr.app.config.fedprox]`` into those keys, and
``--run-config "fedprox.proximal-mu=0.1"`` sets one.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

#: Returns why a value is invalid ("must be > 0"), or None.
Check = Callable[[Any], "str | None"]
AUTO = "auto"
T = TypeVar("T")


class ConfigError(ValueError):
    """A run-config value is missing, of the wrong type or out of range."""


def setting(default: Any, help: str, check: Check | None = None, *, auto: bool = False, node: bool = False) -> Any:
    """A dataclass field declaring one setting. ``auto``: the value may be ``"auto"``, which the method's preset
    replaces; ``node``: a SuperNode's node config may set its own value (a property of its hardware)."""
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "auto": auto, "node": node})


@dataclass(frozen=True)
class Setting:
    """One declared setting, read back from its dataclass field."""

    key: str  # ``<namespace>.<name>`` for a method's setting, ``<name>`` for a core one
    attribute: str
    type: type
    default: Any
    help: str
    check: Check | None
    auto: bool
    node: bool
    namespace: str = ""

    @property
    def name(self) -> str:
        """The key within its namespace (what a method's setting was called before settings had namespaces)."""
        return key_of(self.attribute)

    @property
    def table(self) -> str:
        """Its pyproject table."""
        return f"[tool.flwr.app.config.{self.namespace}]" if self.namespace else "[tool.flwr.app.config]"


def key_of(attribute: str) -> str:
    return attribute.replace("_", "-")


def namespace_of(cls: type) -> str:
    """The prefix of the keys ``cls`` declares: its ``NAMESPACE``, or none (the core settings)."""
    namespace = getattr(cls, "NAMESPACE", "")
    return namespace if isinstance(namespace, str) else ""


_DECLARED: dict[type, tuple[Setting, ...]] = {}


def declared_settings(cls: type) -> tuple[Setting, ...]:
    """The settings a dataclass declares with ``setting(...)``, in declaration order (read once per class: resolving
    the annotations costs about a millisecond, and parsing a run config asks for every class's settings per key)."""
    if cls not in _DECLARED:
        _DECLARED[cls] = _read_settings(cls)
    return _DECLARED[cls]


def _read_settings(cls: type) -> tuple[Setting, ...]:
    hints = typing.get_type_hints(cls)
    namespace = namespace_of(cls)
    return tuple(
        Setting(
            f"{namespace}.{key_of(f.name)}" if namespace else key_of(f.name),
            f.name,
            hints[f.name],
            f.default,
            f.metadata["help"],
            f.metadata["check"],
            f.metadata["auto"],
            f.metadata["node"],
            namespace,
        )
        for f in dataclasses.fields(cls)
        if "help" in f.metadata
    )


def coerce(spec: Setting, value: Any) -> Any:
    """Accept ``value`` if it has the setting's type (ints are fine for floats) and passes its check."""
    expected = spec.type
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if (expected is not bool and isinstance(value, bool)) or not isinstance(value, expected):
        allowed = f'{expected.__name__} or "auto"' if spec.auto else expected.__name__
        raise ConfigError(f"run config '{spec.key}' must be of type {allowed}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"run config '{spec.key}' must be a finite number, got {value!r}")
    problem = spec.check(value) if spec.check else None
    if problem:
        raise ConfigError(f"run config '{spec.key}' = {value!r} is invalid: it {problem}")
    return value


def parse_settings(cls: type[T], values: Mapping[str, Any], **resolved: Any) -> T:
    """An instance of the settings dataclass ``cls`` from run-config ``values`` (kebab-case keys), every value
    checked; ``resolved`` gives attributes already worked out (``auto`` keys after presets)."""
    missing = [s for s in declared_settings(cls) if s.key not in values and s.attribute not in resolved]
    if missing:
        raise ConfigError(f"run config '{missing[0].key}' is missing; add it to {missing[0].table}")
    parsed = {
        s.attribute: resolved[s.attribute] if s.attribute in resolved else coerce(s, values[s.key])
        for s in declared_settings(cls)
    }
    return cls(**parsed)


# Checks shared by the declarations.


def one_of(*allowed: str) -> Check:
    return lambda v: None if v in allowed else f"must be one of {', '.join(repr(a) for a in allowed)}"


def positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def fraction_or_zero(v: float) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def open_fraction(v: float) -> str | None:
    return None if 0 < v < 1 else "must be in (0, 1)"


def below_one(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"
