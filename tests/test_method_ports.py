"""The methods ported onto the plug-in architecture give the results they gave before it, bit for bit.

The expected accuracies and digests are those of the code as it was before the plug-ins (commit 94651d7), running
the cases of ``tests/method_port_cases.py`` with CPU-independent numerics (how and why: that file), so that they
hold on any x86-64 CPU. Recorded on 24 November 2026 with

    git worktree add /tmp/before-plug-ins 94651d7
    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE PYTHONPATH=/tmp/before-plug-ins python tests/method_port_cases.py

(the digests first recorded, in 2026-11-23's default numerics, held only on that day's CPU generation).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.method_port_cases import CASES, PINNED_ENVIRONMENT

REPOSITORY = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="the expected digests are x86-64's: other processors have other matrix libraries (no MKL)",
)
#: case -> (test accuracy per round, digest of the final model's values)
BEFORE_THE_PLUG_INS = {
    "fedavg": ([0.25, 0.25, 0.5], "2a0c30356f7afbe4"),
    "fedprox": ([0.25, 0.6000000238418579, 0.5], "d39634bf47d195a8"),
    "fedft-eds": ([0.25, 0.4950000047683716, 0.25], "6be4737e17a8a495"),
    "fedft-rds-fedentopt": ([0.30000001192092896, 0.25, 0.44999998807907104], "544d7c0d5d987b6e"),
    "fedft-eds-clipped-mean": ([0.25, 0.25, 0.25], "70e4b4d124755123"),
}


@pytest.fixture(scope="module")
def today() -> dict[str, list]:
    """Today's code on the cases, in a process of its own with the pinned numerics."""
    result = subprocess.run(
        [sys.executable, str(REPOSITORY / "tests" / "method_port_cases.py")],
        env={**os.environ, **PINNED_ENVIRONMENT, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_every_case_has_its_expected_result() -> None:
    assert set(BEFORE_THE_PLUG_INS) == set(CASES)


@pytest.mark.parametrize("case", list(BEFORE_THE_PLUG_INS))
def test_a_ported_method_computes_what_it_computed_before(today: dict[str, list], case: str) -> None:
    accuracies, digest = BEFORE_THE_PLUG_INS[case]
    assert today[case] == [accuracies, digest]


def test_the_cases_refuse_to_run_with_numerics_that_depend_on_the_cpu() -> None:
    """Unpinned, the digests would depend on the processor: the script says what to set instead of printing them."""
    environment = {k: v for k, v in os.environ.items() if k not in PINNED_ENVIRONMENT}
    result = subprocess.run(
        [sys.executable, str(REPOSITORY / "tests" / "method_port_cases.py")],
        env={**environment, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "set ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE before starting Python" in result.stderr
