"""The results of one experiment cell as the ServerApp wrote them (server_app/results.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from methods.registry import recorded_config
from run_config.schema import recorded_value
from server_app.results import CONFIG_FILE, ROUNDS_FILE, SUMMARY_FILE


@dataclass(frozen=True)
class CellResult:
    """summary.json, rounds.jsonl and config.json of a finished cell."""

    summary: dict[str, Any]
    rounds: list[dict[str, Any]]
    config: dict[str, Any]


def read_rounds(directory: Path) -> list[dict[str, Any]]:
    """The federated rounds recorded so far (a line still being written is skipped)."""
    rounds: list[dict[str, Any]] = []
    try:
        lines = (directory / ROUNDS_FILE).read_text().splitlines()
    except OSError:
        return rounds
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if "phase" not in record:  # the pretraining round's record, round 0, is the summary's pretraining_round
            rounds.append(record)
    return rounds


def is_finished(directory: Path) -> bool:
    """A cell is finished once its summary.json says it completed (the ServerApp writes it last; a failed or
    interrupted run writes one too; results recorded before summaries had a status count as completed)."""
    try:
        summary = json.loads((directory / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return False
    return summary.get("status", "completed") == "completed"


def read_cell(directory: Path) -> CellResult:
    """A finished cell's results (its config under today's keys)."""
    return CellResult(
        summary=json.loads((directory / SUMMARY_FILE).read_text()),
        rounds=read_rounds(directory),
        config=recorded_config(json.loads((directory / CONFIG_FILE).read_text())),
    )


def config_differences(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """``key: recorded -> wanted`` for every wanted run-config value the recorded config does not have."""
    differences = []
    for key, value in wanted.items():
        old = recorded_value(recorded, key)
        same = (
            math.isclose(old, value, rel_tol=1e-12)
            if isinstance(old, (int, float))
            and isinstance(value, (int, float))
            and not isinstance(old, bool)
            and not isinstance(value, bool)
            else old == value
        )
        if not same:
            differences.append(f"{key}: {old!r} -> {value!r}")
    return differences
