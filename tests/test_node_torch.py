"""A node whose torch cannot import is told why in one line when the ClientApp loads."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "failure",
    [
        'OSError("libgomp.so.1: cannot open shared object file: No such file or directory")',
        'ImportError("/venv/torch/_C.so: wrong ELF class: ELFCLASS64")',
    ],
)
def test_a_torch_that_cannot_import_is_named_in_one_line(tmp_path: Path, failure: str) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(f"raise {failure}\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT}"}
    done = subprocess.run(
        [sys.executable, "-c", "import client_app.app"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    last = done.stderr.strip().splitlines()[-1]
    why = failure.split('("', 1)[1].rstrip('")')
    assert done.returncode != 0
    assert last == (
        f"ImportError: this node cannot load the ClientApp: torch does not import on {platform.machine()} (Python "
        f"{platform.python_version()}): {why}; install a torch build for this machine (docs/deployment.md, "
        "'Edge devices')"
    )
