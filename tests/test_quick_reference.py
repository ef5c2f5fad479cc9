"""The methods' quick-reference table (docs/methods.md, or a method page's own): a row for every registered method,
each command a `make run` whose settings the launcher accepts as written (its full run is
`python -m benchmarks.quick_reference`)."""

from __future__ import annotations

import argparse
import shlex

import pytest

from benchmarks.quick_reference import PAGE, all_rows, with_measurements
from methods.registry import METHODS
from simulation.__main__ import check

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


def test_the_measured_column_is_written_from_the_recording_for_the_rows_whose_command_it_ran() -> None:
    recorded = {
        "fedavg": {
            "command": "make run RUN_CONFIG=\"method='fedavg' model='lenet5'\"",
            "exit_code": 0,
            "wall_seconds": 123.4,
            "load_at_start": 9.71,
            "load_at_end": 11.2,
            "initial_accuracy": 0.114,
            "best_accuracy": 0.7269,
            "date": "2026-11-28",
        },
        "fedprox": {"command": "make run RUN_CONFIG=\"method='fedprox'\"", "exit_code": 0},  # another command
    }
    text = PAGE.read_text()
    written = with_measurements(text, recorded)
    changed = [(a, b) for a, b in zip(text.splitlines(), written.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0].startswith("| [`fedavg`]")
    assert changed[0][1].endswith("| 11.4 → 72.7%, 123 s (load 9.7-11.2) |")
    assert with_measurements(written, {}) == written
