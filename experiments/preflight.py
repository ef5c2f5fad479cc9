"""What an experiment's cells need before any of them runs: their datasets found and their training sets splittable
over the experiment's clients. ``check`` reports it for every cell and ``run`` for the cells it will run, starting
nothing without it, so a file whose split cannot be drawn fails in seconds, naming the cells, rather than after its
first cells have run for an hour."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from experiments.runner import cell_run_config
from experiments.spec import Cell
from methods.registry import generic_dataset, parse_config
from run_config.data_check import check_data, check_split
from run_config.defaults import load_defaults
from run_config.schema import ConfigError


def cell_problems(cells: Sequence[Cell], clients: int, results_dir: Path) -> list[str]:
    """One line per problem (a missing dataset, a split over ``clients`` that cannot be drawn), naming the cells it
    stops. Each cell's split is drawn, or read from ``data-cache-dir`` where an earlier check or run left it."""
    defaults = load_defaults()
    stopped: dict[str, list[str]] = {}
    for cell in cells:
        config = parse_config({**defaults, **cell_run_config(cell, results_dir)})
        try:
            check_data(config, generic_dataset(config))
            check_split(config, clients)
        except ConfigError as err:
            stopped.setdefault(str(err), []).append(cell.name)
    return [f"{_cells(names)}: {problem}" for problem, names in stopped.items()]


def _cells(names: list[str]) -> str:
    if len(names) == 1:
        return f"cell {names[0]}"
    if len(names) <= 3:
        return f"cells {', '.join(names)}"
    return f"cells {', '.join(names[:2])} and {len(names) - 2} more"
