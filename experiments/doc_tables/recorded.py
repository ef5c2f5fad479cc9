"""A recorded experiment as its summary.json holds it (``experiments/summary.py``), and the figures the docs draw
from it: a method's value per seed, paired differences, and their text (points with a true minus sign, mean ± sample
std, seeds ahead).

Only summary.json is read: the cells themselves may live in an archive.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.summary import RECORD_FILE, RECORD_FORMAT, mean_std

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "measurements" / "experiments"
MINUS = "−"
#: A grid point named by its keys and values, e.g. ``{"dirichlet-alpha": 0.1}``.
Point = Mapping[str, object]


class RecordError(LookupError):
    """A figure the docs need is not in the recorded summary (a method, point, seed or field): names what is
    missing and where."""


@dataclass(frozen=True)
class RecordedCell:
    """One finished cell: its summary's numbers, its per-round series, (active learning) its cycles and the commit
    of the code that ran it (None for cells recorded before the runner kept it)."""

    name: str
    method: str
    point: Mapping[str, object]
    seed: int
    machine: str
    summary: Mapping[str, Any]
    rounds: Mapping[str, list[Any]]
    cycles: tuple[Mapping[str, Any], ...]
    code: str | None = None

    def value(self, field: str) -> float:
        """A number of the cell's summary (NaN where the cell recorded it as null)."""
        if field not in self.summary:
            raise RecordError(f"cell {self.name} recorded no {field!r}")
        value = self.summary[field]
        return math.nan if value is None else float(value)

    def series(self, field: str) -> list[Any]:
        """A per-round series over the federated rounds (index 0 is round 1; a record before round 1, such as a
        pretraining round, is left out)."""
        if field not in self.rounds:
            raise RecordError(f"cell {self.name} recorded no round field {field!r}")
        numbers = self.rounds.get("round") or range(1, len(self.rounds[field]) + 1)
        return [v for r, v in zip(numbers, self.rounds[field], strict=True) if r is None or r >= 1]


@dataclass(frozen=True)
class RecordedExperiment:
    """An experiment folder's summary.json."""

    folder: str
    clients: int
    seeds: tuple[int, ...]
    grid: Mapping[str, list[object]]
    methods: tuple[str, ...]
    compare: Mapping[str, str]
    missing: tuple[str, ...]
    cells: tuple[RecordedCell, ...]
    #: Seeds of ``compare`` pairs whose two runs started from different models (``experiments/paired.py``): method,
    #: baseline, grid point and seed of each.
    started_apart: tuple[Mapping[str, Any], ...] = ()

    def cells_of(self, method: str, at: Point | None = None) -> dict[int, RecordedCell]:
        """The method's finished cells at a grid point (every key of ``at`` must match), by seed."""
        at = at or {}
        found = {
            c.seed: c for c in self.cells if c.method == method and all(c.point.get(k) == v for k, v in at.items())
        }
        if not found:
            raise RecordError(f"{self.folder}: no finished cell of {method!r} at {dict(at)}")
        return found

    def values(self, method: str, field: str, at: Point | None = None) -> dict[int, float]:
        """A summary field of the method's cells, by seed."""
        return {seed: cell.value(field) for seed, cell in self.cells_of(method, at).items()}

    def paired(self, method: str, baseline: str, field: str, at: Point | None = None) -> dict[int, float]:
        """method − baseline of a summary field, by seed, over the seeds both finished."""
        a, b = self.values(method, field, at), self.values(baseline, field, at)
        seeds = self._pairable(method, baseline, [s for s in a if s in b], at)
        return {s: a[s] - b[s] for s in seeds}

    def paired_rounds(self, method: str, baseline: str, rounds: slice, at: Point | None = None) -> dict[int, float]:
        """method − baseline of the mean accuracy over ``rounds`` of the federated rounds (a slice of the list from
        round 1), by seed, over the seeds both finished."""
        a, b = self.cells_of(method, at), self.cells_of(baseline, at)
        seeds = self._pairable(method, baseline, [s for s in a if s in b], at)
        return {s: mean_of(a[s].series("accuracy")[rounds]) - mean_of(b[s].series("accuracy")[rounds]) for s in seeds}

    def _pairable(self, method: str, baseline: str, seeds: list[int], at: Point | None) -> list[int]:
        """``seeds``, refused when empty or when the two runs of a seed started from different models."""
        if not seeds:
            raise RecordError(f"{self.folder}: {method!r} and {baseline!r} share no seed at {dict(at or {})}")
        for entry in self.started_apart:
            same_pair = {entry["method"], entry["baseline"]} == {method, baseline}
            at_point = all(entry["point"].get(k) == v for k, v in (at or {}).items())
            if same_pair and at_point and entry["seed"] in seeds:
                raise RecordError(
                    f"{self.folder}: {method!r} and {baseline!r} started from different models on seed "
                    f"{entry['seed']} at {entry['point']}: the pair would not compare the methods alone"
                )
        return seeds

    def one(self, method: str, field: str, at: Point | None = None) -> float:
        """A field of the method's only cell at the point (one seed recorded)."""
        values = self.values(method, field, at)
        if len(values) != 1:
            raise RecordError(f"{self.folder}: {method!r} at {dict(at or {})} has {len(values)} seeds, not one")
        return next(iter(values.values()))

    @property
    def rounds(self) -> int:
        """The rounds every cell ran (the least, where they differ)."""
        return min(int(c.value("rounds")) for c in self.cells)


@functools.cache
def load(folder: str) -> RecordedExperiment:
    """``measurements/experiments/<folder>/summary.json``."""
    path = RECORDED / folder / RECORD_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RecordError(f"{path}: cannot be read ({err})") from err
    if record.get("format") != RECORD_FORMAT:
        raise RecordError(f"{path}: format {record.get('format')!r}, this code reads {RECORD_FORMAT}")
    cells = tuple(
        RecordedCell(
            name=c["name"],
            method=c["method"],
            point=c["point"],
            seed=int(c["seed"]),
            machine=c["machine"],
            summary=c["summary"],
            rounds=c["rounds"],
            cycles=tuple(c.get("cycles", ())),
            code=c.get("code"),
        )
        for c in record["cells"]
    )
    return RecordedExperiment(
        folder=folder,
        clients=int(record["clients"]),
        seeds=tuple(record["seeds"]),
        grid=record["grid"],
        methods=tuple(record["methods"]),
        compare=record["compare"],
        missing=tuple(record["missing"]),
        cells=cells,
        started_apart=tuple(record.get("started_apart", ())),
    )


def load_json(name: str) -> dict[str, Any]:
    """A study's own JSON summary beside the experiment folders (e.g. ``cka-2026-11-26/cka.json``)."""
    path = RECORDED / name
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        raise RecordError(f"{path}: cannot be read ({err})") from err


# --- text of figures ---------------------------------------------------------------------------------------------


def signed(value: float, decimals: int = 1) -> str:
    """``+1.3`` / ``−0.4`` (a true minus sign)."""
    return f"{value:+.{decimals}f}".replace("-", MINUS)


def number(value: float, decimals: int = 1) -> str:
    """``0.4`` / ``−0.4``."""
    return f"{value:.{decimals}f}".replace("-", MINUS)


def pct(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage without the sign: ``0.433`` -> ``43.3``."""
    return number(100 * fraction, decimals)


def thousands(value: float) -> str:
    """``3,080``: rounded to a whole number, with thousands separators."""
    return f"{value:,.0f}".replace("-", MINUS)


def mean_pm(values: Sequence[float], scale: float = 100.0, decimals: int = 2) -> str:
    """``43.30 ± 3.80`` (the mean alone for one value)."""
    mean, std = mean_std([scale * v for v in values])
    return number(mean, decimals) if std is None else f"{number(mean, decimals)} ± {std:.{decimals}f}"


def ahead(differences: Sequence[float]) -> str:
    """``2/3``: on how many seeds the difference is positive."""
    return f"{sum(d > 0 for d in differences)}/{len(differences)}"


def paired_text(differences: Mapping[int, float] | Sequence[float], decimals: int = 1, seeds: bool = True) -> str:
    """Percentage points of fractions: ``−10.9 ± 4.9 (0/3)`` (the mean alone, with its sign, for one seed)."""
    values = list(differences.values()) if isinstance(differences, Mapping) else list(differences)
    mean, std = mean_std([100 * v for v in values])
    text = signed(mean, decimals) if std is None else f"{signed(mean, decimals)} ± {std:.{decimals}f}"
    return f"{text} ({ahead(values)})" if seeds and len(values) > 1 else text


def per_seed(differences: Mapping[int, float], decimals: int = 1) -> str:
    """``−16.2, −9.7, −6.7``: percentage points of fractions, in seed order."""
    return ", ".join(signed(100 * differences[s], decimals) for s in sorted(differences))


def span(values: Sequence[float], scale: float = 100.0, decimals: int = 1) -> str:
    """``9.9–14.4`` (one figure where all are equal at that precision)."""
    low, high = number(scale * min(values), decimals), number(scale * max(values), decimals)
    return low if low == high else f"{low}–{high}"


def mean_of(values: Mapping[int, float] | Sequence[float]) -> float:
    """The mean of a seed mapping's or a sequence's values."""
    return mean_std(list(values.values()) if isinstance(values, Mapping) else list(values))[0]


def last10_name(rounds: int) -> str:
    """What ``mean_last10_accuracy`` is over a run of ``rounds`` rounds: the mean of all of them up to 10 (round 1
    included), else of the last 10."""
    return f"mean of all {rounds} rounds" if rounds <= 10 else f"mean of the last 10 of {rounds} rounds"


# --- comparisons over rounds -------------------------------------------------------------------------------------


def rounds_ahead(leader: Mapping[int, RecordedCell], other: Mapping[int, RecordedCell]) -> tuple[int, int]:
    """(rounds in which ``leader``'s accuracy is above ``other``'s, rounds compared), over the seeds both ran."""
    wins = total = 0
    for seed in leader.keys() & other.keys():
        for a, b in zip(leader[seed].series("accuracy"), other[seed].series("accuracy"), strict=False):
            wins, total = wins + (a > b), total + 1
    return wins, total


def _cost_to_reach(cell: RecordedCell, level: float) -> float:
    """Client seconds summed up to the first round whose accuracy is at least ``level`` (inf if none is)."""
    spent = 0.0
    for accuracy, seconds in zip(cell.series("accuracy"), cell.series("client_train_seconds"), strict=True):
        spent += seconds
        if accuracy >= level:
            return spent
    return math.inf


def cheaper_at_every_level(method: Mapping[int, RecordedCell], baseline: Mapping[int, RecordedCell]) -> int:
    """On how many seeds ``method`` reached each accuracy it reached with fewer client seconds than ``baseline``
    needed to reach it (the accuracy-against-client-seconds figure, seed by seed)."""
    seeds = 0
    for seed in method.keys() & baseline.keys():
        levels = set(method[seed].series("accuracy"))
        seeds += all(_cost_to_reach(method[seed], level) < _cost_to_reach(baseline[seed], level) for level in levels)
    return seeds
