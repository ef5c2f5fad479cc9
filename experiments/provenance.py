"""Which code computed a cell: the runner records its checkout's commit beside each cell it finishes (``code.json``,
kept in the archive with the cell's other records), so that summary.json, summary.md and the docs' tables can name
the commit behind every number. Cells recorded before 29 Nov 2026 have no such file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

CODE_FILE = "code.json"
PROJECT = Path(__file__).resolve().parents[1]
#: Paths whose changes are results or prose, not code: a runner writing its results there leaves the code committed.
NOT_CODE = ("measurements", "results", "docs")


class CodeState(TypedDict):
    """The checkout a runner ran from: its commit, and whether its code differed from that commit."""

    commit: str
    uncommitted_changes: bool


def checkout_state(project: Path = PROJECT) -> CodeState | None:
    """The commit ``project`` has checked out and whether tracked code outside ``NOT_CODE`` differs from it; None
    outside a git checkout (an installed app)."""
    head = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    excluded = [f":(exclude){path}" for path in NOT_CODE]
    status = subprocess.run(
        ["git", "-C", str(project), "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded],
        capture_output=True,
        text=True,
    )
    return CodeState(commit=head.stdout.strip(), uncommitted_changes=bool(status.stdout.strip()))


def record_code(run_folder: Path, state: CodeState | None) -> None:
    """Write ``state`` into a finished cell's folder (nothing outside a git checkout)."""
    if state is not None:
        (run_folder / CODE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def code_text(files: Mapping[str, bytes]) -> str | None:
    """``1a2b3c4`` or ``1a2b3c4 with uncommitted changes``, from a cell's recorded files; None when it has no
    ``code.json``."""
    if CODE_FILE not in files:
        return None
    state = json.loads(files[CODE_FILE])
    return str(state["commit"])[:7] + (" with uncommitted changes" if state["uncommitted_changes"] else "")
