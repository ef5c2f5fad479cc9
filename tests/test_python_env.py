"""deployment/python-env.sh, which every start script sources: the interpreter it picks, the folder of its console
scripts, and its one-line refusal of one without Flower (looked up, not imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "deployment" / "python-env.sh"


def sourced(
    python: str, show: str = "$python", path_first: Path | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Source the script with ``PYTHON=python`` (``path_first`` before PATH, run in ``cwd``), then print ``show``."""
    path = os.environ["PATH"] if path_first is None else f"{path_first}:{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && echo "{show}"'],
        env={**os.environ, "PYTHON": python, "PATH": path},
        cwd=cwd,
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


def test_the_console_scripts_are_the_interpreters_own_even_named_by_a_bare_command(tmp_path: Path) -> None:
    """``PYTHON=python3`` with the environment's bin on PATH (a conda env, an activated venv's python3) once made
    start-supernode.sh run ``./flower-supernode``: the scripts folder comes from the interpreter, not from the name
    it was given. Run from an empty folder, so that no ``./flower-supernode`` could answer."""
    environment = Path(sys.executable).parent
    done = sourced("python3", "$scripts", path_first=environment, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == environment and (environment / "flower-supernode").is_file()
