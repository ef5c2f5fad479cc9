"""Markdown pieces the generated blocks share: tables, verdicts, a study's recorded paired difference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiments.doc_tables.recorded import mean_of, number, signed
from experiments.summary import mean_std


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def bold_largest(texts: Sequence[str], values: Sequence[float]) -> list[str]:
    """``texts`` with the one(s) of the largest value in bold (a column's best, as the papers mark it)."""
    top = max(values)
    return [f"**{t}**" if v == top else t for t, v in zip(texts, values, strict=True)]


def verdict(differences: Mapping[int, float], direction: int) -> str:
    """The table's verdict on a paper's claim that the method is ahead (``direction`` 1) or behind (−1):
    **reproduces** where every seed goes the paper's way, **partly** where the mean and most seeds do, **does not**
    otherwise; "(level)" added to the last two where the mean is within one standard deviation of zero (a mean that
    small is not told apart from none by these seeds)."""
    values = list(differences.values())
    held = sum(d * direction > 0 for d in values)
    mean, std = mean_std(values)
    level = " (level)" if std is not None and abs(mean) <= std else ""
    if held == len(values):
        return "reproduces"
    if mean * direction > 0 and held > len(values) / 2:
        return "partly" + level
    return "does not" + level


def level_verdict(differences: Mapping[int, float]) -> str:
    """The verdict on a claim that two methods are level: the mean within one standard deviation of zero."""
    mean, std = mean_std(list(differences.values()))
    return "reproduces (level)" if std is not None and abs(mean) <= std else "does not"


def study(entry: Mapping[str, Any], seeds: bool = True) -> str:
    """A study's recorded paired difference (``{"per_seed", "mean", "sd", "ahead"}``, in points):
    ``−3.4 ± 2.0 (0/3)``."""
    text = f"{signed(entry['mean'])} ± {entry['sd']:.1f}"
    return f"{text} ({entry['ahead']}/{len(entry['per_seed'])})" if seeds else text


def study_differences(entry: Mapping[str, Any]) -> dict[int, float]:
    """A study's recorded paired difference as fractions by seed, as ``RecordedExperiment.paired`` gives them."""
    return {int(s): v / 100 for s, v in zip(entry["seeds"], entry["per_seed"], strict=True)}


def points_range(values: Sequence[float], decimals: int = 1) -> str:
    """``+8.0 to +17.8`` (points, signed)."""
    low, high = signed(min(values), decimals), signed(max(values), decimals)
    return low if low == high else f"{low} to {high}"


def whole_range(values: Sequence[float]) -> str:
    """``11–17``: whole numbers (points or percent)."""
    low, high = number(min(values), 0), number(max(values), 0)
    return low if low == high else f"{low}–{high}"


def mean_text(values: Mapping[int, float] | Sequence[float], decimals: int = 1) -> str:
    """A percentage of fractions' mean: ``43.3``."""
    return number(100 * mean_of(values), decimals)
