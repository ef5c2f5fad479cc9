"""The methods ported onto the plug-in architecture give the results they gave before it, bit for bit.

The expected accuracies and digests are those of the code as it was before the plug-ins (commit 94651d7), running
the cases of ``tests/method_port_cases.py`` with CPU-independent numerics (how and why: that file), so that they
hold on any x86-64 CPU with MKL. Recorded on 24 November 2026 with

    git worktree add /tmp/before-plug-ins 94651d7
    PYTHONPATH=/tmp/before-plug-ins python tests/method_port_cases.py

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
import torch

from tests.method_port_cases import CASES

REPOSITORY = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64") or not torch.backends.mkl.is_available(),
    reason="the expected digests are those of x86-64 with MKL: other builds have other matrix libraries",
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
def today() -> dict:
    """Today's code on the cases, in a process of its own that pins its numerics."""
    result = subprocess.run(
        [sys.executable, str(REPOSITORY / "tests" / "method_port_cases.py")],
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_every_case_has_its_expected_result() -> None:
    assert set(BEFORE_THE_PLUG_INS) == set(CASES)


def test_the_cases_ran_with_pinned_numerics(today: dict) -> None:
    assert today["numerics"] == {
        "aten_cpu_capability": "DEFAULT",
        "mkl": True,
        "mkl_cbwr": "COMPATIBLE",
        "numpy_dispatched_features_on": [],
    }


@pytest.mark.parametrize("case", list(BEFORE_THE_PLUG_INS))
def test_a_ported_method_computes_what_it_computed_before(today: dict, case: str) -> None:
    accuracies, digest = BEFORE_THE_PLUG_INS[case]
    assert today["cases"][case] == [accuracies, digest]
