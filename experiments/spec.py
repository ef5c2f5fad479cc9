"""An experiment file: a base run configuration, named methods, a grid of run-config values and seeds.

Example (``experiments/smoke.yaml``)::

    description: Two FedFT presets on the embedded mini set.
    cost: about 2 min on 2 CPU cores
    clients: 10
    base: {dataset: fashion-mnist-mini, num-server-rounds: 3}
    methods: [fedft-eds, fedft-rds]
    grid: {dirichlet-alpha: [0.1]}
    seeds: [0]

``methods`` is a list of method presets or a mapping ``label: {run-config overrides}``; a label that names
a preset sets ``method`` to it unless the overrides do. Every cell is one simulation: each method at each
grid point (the product of the grid's lists) with each seed. ``load_experiment`` checks the whole file,
and every cell's configuration, before anything runs.
"""

from __future__ import annotations

import difflib
import fnmatch
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from methods.registry import CATALOGUE, METHODS, parse_config
from run_config import ConfigError
from run_config.defaults import load_defaults
from run_config.parsing import keys_ignored_by
from run_config.paths import folder_name_problem

#: Run-config keys the runner sets itself for every cell.
RUNNER_KEYS = ("seed", "results-dir", "run-name", "resume")


class ExperimentFileError(ValueError):
    """The experiment file cannot be run; the message names the file, the key and what is allowed."""


@dataclass(frozen=True)
class EntropyHistogram:
    """The paper's Fig. 1: hardened-softmax entropies of one client's data under several ρ."""

    temperatures: tuple[float, ...]
    partition: int = 0
    method: str = ""  # whose configuration gives the model and data; empty = the first method


@dataclass(frozen=True)
class RoundsToReach:
    """The KAFAL paper's Table 1: rounds each method needs to reach ``method``'s accuracy after ``round``."""

    method: str
    round: int


@dataclass(frozen=True)
class Cell:
    """One simulation of an experiment."""

    method: str  # the method's label in the file
    point: tuple[tuple[str, Any], ...]  # the grid values, in the grid's key order
    seed: int
    #: run-config values beyond the defaults (runner keys excluded); method, point and seed identify a cell
    overrides: Mapping[str, Any] = field(compare=False, hash=False)

    @property
    def name(self) -> str:
        """Folder name of the cell's results: method, grid values, seed."""
        parts = [self.method, *(f"{key}={_text(value)}" for key, value in self.point), f"seed{self.seed}"]
        return "__".join(parts)

    @property
    def point_label(self) -> str:
        return point_label(self.point)


@dataclass(frozen=True)
class Experiment:
    """A validated experiment file."""

    path: Path
    name: str
    description: str
    cost: str
    clients: int
    cpus_per_client: int
    base: Mapping[str, Any]
    methods: Mapping[str, Mapping[str, Any]]
    grid: Mapping[str, tuple[Any, ...]]
    seeds: tuple[int, ...]
    scaled_down: str = ""
    paper: str = ""
    histogram: EntropyHistogram | None = None
    rounds_to_reach: RoundsToReach | None = None
    #: method label -> the baseline label it is compared with seed by seed (``experiments/paired.py``)
    compare: Mapping[str, str] = field(default_factory=dict)
    cells: tuple[Cell, ...] = field(default=(), repr=False)


def point_label(point: tuple[tuple[str, Any], ...]) -> str:
    """Grid values as ``key=value, ...`` (empty when the grid has no keys)."""
    return ", ".join(f"{key}={_text(value)}" for key, value in point)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_FIELDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "name": (str, "a short name (default: the file name)"),
    "description": (str, "what the experiment shows"),
    "paper": (str, "the table or figure of the papers it mirrors"),
    "cost": (str, "how long it takes, and on what machine"),
    "scaled-down": (str, "what it scales down from the paper"),
    "clients": (int, "number of simulated clients (SuperNodes)"),
    "cpus-per-client": (int, "Ray CPUs per ClientApp"),
    "base": (dict, "run-config values for every cell"),
    "methods": ((list, dict), "a list of method presets, or a mapping label -> run-config values"),
    "grid": (dict, "run-config key -> list of values; cells are the product of the lists"),
    "seeds": (list, "list of seeds (integers >= 0)"),
    "entropy-histogram": (dict, "temperatures (list), partition (int), method (label)"),
    "rounds-to-reach": (dict, "method (label) and round (int): rounds every method needs to reach its accuracy"),
    "compare": (dict, "method label -> baseline label: paired differences per seed in the summary"),
}
_REQUIRED = ("description", "cost", "methods")


def _type_name(expected: type | tuple[type, ...]) -> str:
    names = {str: "text", int: "an integer", dict: "a mapping", list: "a list", float: "a number", bool: "true/false"}
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(names.get(t, t.__name__) for t in types)


class _Checker:
    """Raises ``ExperimentFileError`` prefixed with the file's path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.defaults = load_defaults()

    def fail(self, key: str, problem: str) -> NoReturn:
        raise ExperimentFileError(f"{self.path}: '{key}' {problem}")

    def typed(self, key: str, value: Any, expected: type | tuple[type, ...]) -> Any:
        types = expected if isinstance(expected, tuple) else (expected,)
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            self.fail(key, f"must be {_type_name(expected)}, got {type(value).__name__} {value!r}")
        return value

    def run_config(self, where: str, values: Any) -> dict[str, Any]:
        """A mapping of run-config keys to scalar values."""
        values = {} if values is None else self.typed(where, values, dict)
        for key, value in values.items():
            self.run_config_key(where, key)
            self.scalar(f"{where}.{key}", value)
        return dict(values)

    def run_config_key(self, where: str, key: Any) -> None:
        """``key`` is a run-config key that an experiment may set."""
        if key in RUNNER_KEYS:
            self.fail(
                f"{where}.{key}",
                "is set by the runner for every cell; "
                + ("list seeds under 'seeds'" if key == "seed" else "remove it"),
            )
        if key not in self.defaults:
            close = difflib.get_close_matches(str(key), [k for k in self.defaults if k not in RUNNER_KEYS], n=3)
            self.fail(
                f"{where}.{key}",
                "is not a run-config key; "
                + (
                    f"did you mean {' or '.join(repr(c) for c in close)}?"
                    if close
                    else "docs/configuration.md lists every key"
                ),
            )

    def scalar(self, where: str, value: Any) -> None:
        """Run-config values are text, numbers or booleans."""
        if not isinstance(value, (bool, int, float, str)):
            self.fail(where, f"must be a single value (text, number or true/false), got {value!r}")


def _methods(check: _Checker, raw: Any) -> dict[str, dict[str, Any]]:
    if isinstance(raw, list):
        for index, name in enumerate(raw):
            check.typed(f"methods[{index}]", name, str)
        raw = {name: {} for name in raw}
    if not raw:
        check.fail("methods", "is empty; list at least one of " + ", ".join(METHODS))
    methods = {}
    for label, overrides in raw.items():
        check.typed(f"methods.{label}", label, str)
        values = check.run_config(f"methods.{label}", overrides)
        if "method" not in values:
            if label not in METHODS:
                check.fail(
                    f"methods.{label}", "is not a method preset and sets no 'method'; presets: " + ", ".join(METHODS)
                )
            values["method"] = label
        if values["method"] not in METHODS:
            check.fail(f"methods.{label}.method", f"= {values['method']!r} is unknown; allowed: " + ", ".join(METHODS))
        if "__" in label or "/" in label:
            check.fail(f"methods.{label}", "must not contain '__' or '/' (it names result folders)")
        methods[label] = values
    return methods


def _grid(check: _Checker, raw: Any) -> dict[str, tuple[Any, ...]]:
    grid: dict[str, tuple[Any, ...]] = {}
    if raw is None:
        return grid
    if not raw:
        check.fail("grid", "is empty; give run-config key -> list of values, or leave 'grid' out")
    for key, values in raw.items():
        check.run_config_key("grid", key)
        values = check.typed(f"grid.{key}", values, list)
        if not values:
            check.fail(f"grid.{key}", "is an empty list; give at least one value")
        for index, value in enumerate(values):
            check.scalar(f"grid.{key}[{index}]", value)
        grid[key] = tuple(values)
    return grid


def _seeds(check: _Checker, raw: Any) -> tuple[int, ...]:
    if raw is None:
        return (0,)
    seeds = check.typed("seeds", raw, list)
    if not seeds:
        check.fail("seeds", "is an empty list; give at least one seed")
    for index, seed in enumerate(seeds):
        check.typed(f"seeds[{index}]", seed, int)
        if seed < 0:
            check.fail(f"seeds[{index}]", f"must be >= 0, got {seed}")
    if len(set(seeds)) != len(seeds):
        check.fail("seeds", f"repeats a seed: {seeds}")
    return tuple(seeds)


def _histogram(check: _Checker, raw: Any, methods: Mapping[str, Any], clients: int) -> EntropyHistogram | None:
    if raw is None:
        return None
    allowed = ("temperatures", "partition", "method")
    for key in raw:
        if key not in allowed:
            check.fail(f"entropy-histogram.{key}", "is unknown; allowed: " + ", ".join(allowed))
    temperatures = check.typed("entropy-histogram.temperatures", raw.get("temperatures"), list)
    if not temperatures:
        check.fail("entropy-histogram.temperatures", "is empty; give at least one ρ > 0")
    for index, rho in enumerate(temperatures):
        check.typed(f"entropy-histogram.temperatures[{index}]", rho, (int, float))
        if not (math.isfinite(rho) and rho > 0):
            check.fail(f"entropy-histogram.temperatures[{index}]", f"must be > 0, got {rho}")
    partition = check.typed("entropy-histogram.partition", raw.get("partition", 0), int)
    if not 0 <= partition < clients:
        check.fail("entropy-histogram.partition", f"must be a partition id in [0, {clients}), got {partition}")
    method = check.typed("entropy-histogram.method", raw.get("method", next(iter(methods))), str)
    if method not in methods:
        check.fail(
            "entropy-histogram.method", f"= {method!r} is not a method of this file; allowed: " + ", ".join(methods)
        )
    return EntropyHistogram(tuple(float(t) for t in temperatures), partition, method)


def _rounds_to_reach(check: _Checker, raw: Any, methods: Mapping[str, Any]) -> RoundsToReach | None:
    if raw is None:
        return None
    for key in raw:
        if key not in ("method", "round"):
            check.fail(f"rounds-to-reach.{key}", "is unknown; allowed: method, round")
    method = check.typed("rounds-to-reach.method", raw.get("method"), str)
    if method not in methods:
        check.fail(
            "rounds-to-reach.method", f"= {method!r} is not a method of this file; allowed: " + ", ".join(methods)
        )
    round_ = check.typed("rounds-to-reach.round", raw.get("round"), int)
    if round_ < 1:
        check.fail("rounds-to-reach.round", f"must be >= 1, got {round_}")
    return RoundsToReach(method, round_)


def _compare(check: _Checker, raw: Any, methods: Mapping[str, Any]) -> dict[str, str]:
    if raw is None:
        return {}
    pairs = check.typed("compare", raw, dict)
    for method, baseline in pairs.items():
        for where, label in ((f"compare.{method}", method), (f"compare.{method} (its baseline)", baseline)):
            check.typed(where, label, str)
            if label not in methods:
                check.fail(where, f"= {label!r} is not a method of this file; allowed: " + ", ".join(methods))
        if method == baseline:
            check.fail(f"compare.{method}", "names the method as its own baseline")
    return dict(pairs)


def expand_cells(
    methods: Mapping[str, Mapping[str, Any]],
    grid: Mapping[str, tuple[Any, ...]],
    seeds: tuple[int, ...],
    base: Mapping[str, Any],
) -> tuple[Cell, ...]:
    """Every (grid point, method, seed), in that nesting order; a method's own values win over the grid's,
    which win over ``base``. A method's own setting in ``base`` (FedProx's ``fedprox.proximal-mu`` beside FedAvg) goes
    to the cells whose method (or objective) reads it; the others leave it out, as a run refuses another method's
    setting."""
    cells = []
    for values in itertools.product(*grid.values()):
        point = tuple(zip(grid, values))
        for label, overrides in methods.items():
            merged = {**base, **dict(point), **overrides}  # overrides hold the cell's method
            ignored = keys_ignored_by(merged, CATALOGUE) - set(overrides)
            cell_values = {key: value for key, value in merged.items() if key not in ignored}
            for seed in seeds:
                cells.append(Cell(label, point, seed, cell_values))
    return tuple(cells)


def select_cells(cells: tuple[Cell, ...], patterns: tuple[str, ...]) -> tuple[Cell, ...]:
    """The cells whose name matches any of the shell-style ``patterns`` (all cells when there are none), in
    file order; raise ``ValueError`` naming a pattern that matches no cell, so a typo does not run nothing."""
    if not patterns:
        return cells
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(cell.name, pattern) for cell in cells):
            raise ValueError(
                f"--only {pattern!r} matches no cell; cells are named <method>__<key>=<value>__seed<n>, "
                f"e.g. {cells[0].name}"
            )
    return tuple(c for c in cells if any(fnmatch.fnmatchcase(c.name, p) for p in patterns))


def parse_experiment(raw: Any, path: Path) -> Experiment:
    """Validate a parsed YAML document; raise ``ExperimentFileError`` naming the key and what is allowed."""
    check = _Checker(path)
    if not isinstance(raw, dict):
        raise ExperimentFileError(f"{path}: the file must be a YAML mapping with keys {', '.join(_FIELDS)}")
    for key in raw:
        if key not in _FIELDS:
            check.fail(key, "is not an experiment key; allowed: " + ", ".join(_FIELDS))
    for key in _REQUIRED:
        if key not in raw:
            check.fail(key, f"is missing: {_FIELDS[key][1]}")
    for key, value in raw.items():
        if key not in ("grid", "seeds", "base") or value is not None:
            check.typed(key, value, _FIELDS[key][0])
    clients = raw.get("clients", 10)
    cpus = raw.get("cpus-per-client", 1)
    for key, value in (("clients", clients), ("cpus-per-client", cpus)):
        if value < 1:
            check.fail(key, f"must be >= 1, got {value}")
    base = check.run_config("base", raw.get("base"))
    methods = _methods(check, raw["methods"])
    grid = _grid(check, raw.get("grid"))
    seeds = _seeds(check, raw.get("seeds"))
    name = raw.get("name", path.stem)
    problem = folder_name_problem(name)
    if problem:
        check.fail(
            "name",
            f"= {name!r} names the results folder and {problem}"
            + ("" if "name" in raw else "; set 'name' in the file"),
        )
    cells = expand_cells(methods, grid, seeds, base)
    for cell in cells:
        problem = folder_name_problem(cell.name)
        if problem:
            raise ExperimentFileError(
                f"{path}: cell {cell.name!r}: its folder name (method label, grid values, seed) {problem}"
            )
        try:
            parse_config({**check.defaults, **cell.overrides, "seed": cell.seed})
        except ConfigError as err:
            raise ExperimentFileError(f"{path}: cell {cell.name}: {err}") from None
    return Experiment(
        path=path,
        name=name,
        description=raw["description"],
        cost=raw["cost"],
        clients=clients,
        cpus_per_client=cpus,
        base=base,
        methods=methods,
        grid=grid,
        seeds=seeds,
        scaled_down=raw.get("scaled-down", ""),
        paper=raw.get("paper", ""),
        histogram=_histogram(check, raw.get("entropy-histogram"), methods, clients),
        rounds_to_reach=_rounds_to_reach(check, raw.get("rounds-to-reach"), methods),
        compare=_compare(check, raw.get("compare"), methods),
        cells=cells,
    )


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last one silently); a
    key that overrides one merged in with ``<<`` is no repetition."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment file (a key given twice in one mapping is an error)."""
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except OSError as err:
        raise ExperimentFileError(f"{path}: cannot be read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ExperimentFileError(f"{path}: is not valid YAML: {err}") from None
    return parse_experiment(raw, path)
