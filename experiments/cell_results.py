"""The results of one experiment cell as the ServerApp wrote them (server_app/results.py): read from the cell's folder
while it runs, and from its recorded files (the folder, or the experiment's archive) once it has finished."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run_config.defaults import load_defaults
from server_app.results import CONFIG_FILE, ROUNDS_FILE, SUMMARY_FILE

#: A recorded cell's files: file name -> content (config.json, rounds.jsonl, summary.json and the method's own).
CellFiles = Mapping[str, bytes]


class CellFileError(ValueError):
    """A recorded cell's file is missing or cannot be read; the message names the cell and the file."""


@dataclass(frozen=True)
class CellResult:
    """summary.json, rounds.jsonl and config.json of a finished cell, and every file it recorded (by name)."""

    summary: dict[str, Any]
    rounds: list[dict[str, Any]]
    config: dict[str, Any]
    files: CellFiles = field(default_factory=dict, repr=False)

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        """The rows of one of the cell's JSON-lines files (KAFAL's cycles.jsonl); none when it has no such file."""
        return [json.loads(line) for line in self.files.get(name, b"").decode().splitlines() if line.strip()]


def parse_rounds(text: str) -> list[dict[str, Any]]:
    """The federated rounds of a rounds.jsonl text (a line still being written ends them)."""
    rounds: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if "phase" not in record:  # the pretraining round's record, round 0, is the summary's pretraining_round
            rounds.append(record)
    return rounds


def read_rounds(directory: Path) -> list[dict[str, Any]]:
    """The federated rounds a running cell has recorded so far in its folder."""
    try:
        return parse_rounds((directory / ROUNDS_FILE).read_text())
    except OSError:
        return []


def completed(summary: Mapping[str, Any]) -> bool:
    """Whether a summary.json says its run completed (the ServerApp writes it last; a failed or interrupted run writes
    one too; results recorded before summaries had a status count as completed)."""
    return summary.get("status", "completed") == "completed"


def is_finished(directory: Path) -> bool:
    """Whether the cell in ``directory`` has finished: its summary.json says it completed."""
    try:
        summary = json.loads((directory / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and completed(summary)


def _json(files: CellFiles, name: str, where: str) -> Any:
    if name not in files:
        raise CellFileError(f"{where}: {name} is missing")
    try:
        return json.loads(files[name])
    except ValueError as err:
        raise CellFileError(f"{where}: {name} is not JSON: {err}") from None


def cell_result(files: CellFiles, where: str) -> CellResult:
    """A finished cell from its recorded files; ``where`` names the cell in errors (``CellFileError``)."""
    summary, config = _json(files, SUMMARY_FILE, where), _json(files, CONFIG_FILE, where)
    if not isinstance(summary, dict) or not isinstance(config, dict):
        raise CellFileError(f"{where}: {SUMMARY_FILE} and {CONFIG_FILE} must each hold a JSON object")
    if ROUNDS_FILE not in files:
        raise CellFileError(f"{where}: {ROUNDS_FILE} is missing")
    return CellResult(summary, parse_rounds(files[ROUNDS_FILE].decode()), config, dict(files))


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys of a recorded config.json that are not run-config keys today: it was recorded before a setting was
    renamed or removed, and is neither compared with today's settings nor reported until it is recorded again under
    today's keys (no reader translates an earlier version's keys)."""
    known = load_defaults()
    return sorted(key for key in config if key not in known)


def config_differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """``key: recorded -> wanted`` for every wanted run-config value the recorded config does not have (a key it
    does not hold at all reads as None)."""
    differences = []
    for key, value in wanted.items():
        old = recorded.get(key)
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
