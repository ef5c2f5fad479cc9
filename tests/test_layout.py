"""The layout shows the architecture: measured results live in measurements/, never inside a code package."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_PACKAGES = (  # what the wheel ships: a SuperNode or SuperLink runs these
    "client_app",
    "server_app",
    "strategies",
    "methods",
    "models",
    "data",
    "run_config",
    "protocol",
    "simulation",
    "deployment",
)
TOOL_PACKAGES = ("experiments", "benchmarks", "scripts")  # run from a clone only
CODE_PACKAGES = RUNTIME_PACKAGES + TOOL_PACKAGES
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


def test_every_code_package_is_in_the_wheel() -> None:
    import tomllib

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert set(wheel["packages"]) == set(RUNTIME_PACKAGES)
