"""The methods' quick-reference table (docs/methods.md, or a method page's own): a row for every registered method,
each command a `make run` whose settings the launcher accepts as written."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from methods.registry import METHODS
from simulation.__main__ import check

PAGE = Path(__file__).resolve().parents[1] / "docs" / "methods.md"
START, END = "<!-- quick-reference:start -->", "<!-- quick-reference:end -->"


def table_rows(text: str) -> list[tuple[str, str]]:
    """(method, command) of each row of the quick-reference table: the first column's first `name`, the second's
    code span."""
    block = text.split(START, 1)[1].split(END, 1)[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        names, commands = re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])
        if names and commands:
            rows.append((names[0], commands[0]))
    return rows


def all_rows() -> list[tuple[str, str]]:
    """The rows of docs/methods.md's table, then those of a method page's own table (docs/methods/<name>.md, between
    the same markers): a method added as a package brings its row in its page."""
    rows = table_rows(PAGE.read_text())
    for page in sorted((PAGE.parent / "methods").glob("*.md")):
        if START in (text := page.read_text()):
            rows += table_rows(text)
    return rows


ROWS = all_rows()


def make_run_arguments(command: str) -> argparse.Namespace:
    """What ``make run`` hands ``python -m simulation`` for ``make run [NUM_SUPERNODES=N] [RUN_CONFIG=...]``."""
    make, target, *assignments = shlex.split(command)
    assert (make, target) == ("make", "run"), command
    values = dict(assignment.split("=", 1) for assignment in assignments)
    assert set(values) <= {"NUM_SUPERNODES", "RUN_CONFIG"}, command
    return argparse.Namespace(
        run_config=values.get("RUN_CONFIG", ""),
        num_supernodes=int(values.get("NUM_SUPERNODES", 10)),
        cpus_per_client=1,
        gpus_per_client=0.0,
        ray_address="",
    )


def test_every_method_has_a_row():
    assert sorted(method for method, _ in ROWS) == sorted(METHODS)


@pytest.mark.parametrize(("method", "command"), ROWS)
def test_the_command_runs_the_method_and_its_settings_are_accepted(method: str, command: str) -> None:
    arguments = make_run_arguments(command)
    assert method == "fedft-eds" or f"method='{method}'" in arguments.run_config
    check(arguments)
