"""The layout shows the architecture: measured results live in measurements/, never inside a code package."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Every top-level folder holding Python code, the tests apart.
CODE_PACKAGES = tuple(sorted({path.parent.name for path in ROOT.glob("*/*.py")} - {"tests"}))
TOOL_PACKAGES = ("experiments", "benchmarks", "scripts")  # run from a clone only
#: What the wheel ships: a SuperNode or SuperLink runs these.
RUNTIME_PACKAGES = tuple(package for package in CODE_PACKAGES if package not in TOOL_PACKAGES)
RESULT_SUFFIXES = {".jsonl", ".csv", ".png", ".json"}
DATA_ASSETS = ROOT / "data" / "assets"  # the embedded dataset is data the code ships, not a result


def test_no_result_files_inside_code_packages() -> None:
    found = [
        path.relative_to(ROOT)
        for package in CODE_PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.suffix in RESULT_SUFFIXES and DATA_ASSETS not in path.parents and "__pycache__" not in path.parts
    ]
    assert found == []


def test_every_code_package_is_layered_and_every_runtime_package_is_in_the_wheel() -> None:
    """A package left out of the wheel installs without error and fails at its first import (profiling, which the
    ServerApp and ClientApp import, was missing until 29 Nov 2026)."""
    assert sorted(PYPROJECT["tool"]["importlinter"]["root_packages"]) == list(CODE_PACKAGES)
    assert sorted(PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]) == list(RUNTIME_PACKAGES)
