"""Paired differences over seeds, as the measured-reason benchmarks report them: each seed's arm − base in points,
their mean ± sample sd and the seeds on which the arm is ahead."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

#: arm -> seed -> the seed's figures (fractions in [0, 1])
Results = Mapping[str, Mapping[int, Mapping[str, Any]]]


def paired(results: Results, arm: str, base: str, key: str) -> dict[str, Any]:
    """Per-seed differences arm − base (points) of ``key``, their mean ± sample sd and the seeds on which arm is
    ahead, over the seeds both arms ran."""
    seeds = sorted(set(results[arm]) & set(results[base]))
    diffs = [100 * (results[arm][s][key] - results[base][s][key]) for s in seeds]
    return {
        "seeds": seeds,
        "per_seed": [round(d, 2) for d in diffs],
        "mean": round(statistics.mean(diffs), 2),
        "sd": round(statistics.stdev(diffs), 2) if len(diffs) > 1 else None,
        "ahead": sum(d > 0 for d in diffs),
    }
