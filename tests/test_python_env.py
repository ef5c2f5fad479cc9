"""deployment/python-env.sh, which every start script sources: the interpreter it picks, and its one-line refusal
of one without Flower (looked up, not imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "deployment" / "python-env.sh"


def sourced(python: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && echo "$python"'],
        env={**os.environ, "PYTHON": python},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_interpreter_with_flower_is_taken() -> None:
    done = sourced(sys.executable)
    assert done.returncode == 0 and done.stdout.strip() == sys.executable, done.stderr


def test_an_interpreter_without_flower_is_refused_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "python"  # this Python without site-packages: no Flower
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    done = sourced(str(bare))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"error: {bare} has no Flower" in done.stderr, done.stderr
