"""Paired differences per seed: each method against its named baseline on the same seed, split and start.

A seed fixes the split, the start and every draw, so the difference of two methods' runs on one seed removes what the
two runs share; the mean of those differences, their spread and how many seeds the method wins say more than two
means of unpaired runs (``compare: {method: baseline}`` in an experiment file).

A pair is only as good as its shared start. Two runs whose start settings agree (``start_settings``) should start from
one model, yet they do not when the cached start was made again between them under other conditions (torch's thread
count changes the pretrained weights: docs/configuration.md, "Reproducible starts"). Such a seed is left out of the
pair and named, judged by the start's fingerprint (summary.json's ``start_fingerprint``) or, for runs recorded before
it, by the start's test accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.cell_results import CellResult
from experiments.spec import Cell, Experiment, point_label
from experiments.summary import mean_std

Point = tuple[tuple[str, object], ...]

#: summary.json fields compared, with their column titles (accuracies, shown in percentage points).
COMPARED = {"best_accuracy": "best acc.", "final_accuracy": "final acc.", "mean_last10_accuracy": "last-10 mean"}
#: A model a method adds beside the global one, compared where both cells of every pair recorded it.
ALSO_COMPARED = {
    "best_composed_accuracy": "best composed acc.",
    "best_client_accuracy_mean": "best client-mean acc.",
    "best_base_accuracy": "best base acc.",
}


@dataclass(frozen=True)
class PairedRow:
    """One method against its baseline at one grid point: the per-seed differences of each compared field."""

    point: Point
    method: str
    baseline: str
    seeds: tuple[int, ...]
    differences: Mapping[str, tuple[float, ...]]  # field -> method − baseline, per seed (fractions)


#: Two recorded accuracies of one model may differ by float32 rounding (0.106 was recorded as 0.10600000619888306 and
#: as 0.10599999874830246). The accuracy stands in for the fingerprint only where a run predates it, and it only
#: tells apart starts whose accuracies differ.
ACCURACY_ROUNDING = 1e-6
#: config.json keys that do not change the model a run starts from, among those named ``pretrain*``.
NOT_START_SETTINGS = frozenset({"pretrain-cache-dir"})
#: Settings besides ``pretrain*`` that fix the start: the model and the split over the clients
#: (``run_config.federated_split``), and, where the run has a pretraining round, how its clients train
#: (``server_app.pretraining_round.round_key``).
MODEL_AND_SPLIT = (
    "model",
    "dropout",
    "phi-end",
    "dataset",
    "data-dir",
    "image-column",
    "label-column",
    "partitioner",
    "dirichlet-alpha",
    "min-partition-size",
    "self-balancing",
    "classes-per-client",
    "public-fraction",
)
ROUND_TRAINING = (
    "learning-rate",
    "momentum",
    "weight-decay",
    "batch-size",
    "augment",
    "eval-batch-size",
    "fail-partitions",
    "client-threads",
)

Results = Mapping[tuple[Point, str, int], CellResult]


def start_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a run's config that fix its start (with the seed, which a pair shares)."""
    keys = [k for k in config if k.startswith("pretrain") and k not in NOT_START_SETTINGS]
    keys += MODEL_AND_SPLIT
    if config.get("pretrain-round") is True:
        keys += ROUND_TRAINING
    return {k: config[k] for k in keys if k in config}


def _same_settings(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two runs' start settings agree on every key both recorded (a key added since one ran is not held
    against it)."""
    return all(a[k] == b[k] for k in a.keys() & b.keys()) and a.get("pretrain-round") == b.get("pretrain-round")


def different_starts(a: CellResult, b: CellResult) -> bool:
    """Whether two runs meant to share a start (same start settings) started from different models: their start
    fingerprints differ, or, where either predates the fingerprint, the start's test accuracy does."""
    if not _same_settings(start_settings(a.config), start_settings(b.config)):
        return False  # the pair compares starts on purpose (e.g. FedAvg with and without pretraining)
    fingerprints = a.summary.get("start_fingerprint"), b.summary.get("start_fingerprint")
    if None not in fingerprints:
        return fingerprints[0] != fingerprints[1]
    first, second = a.summary.get("initial_accuracy"), b.summary.get("initial_accuracy")
    if first is None or second is None:
        return False
    return abs(float(first) - float(second)) > ACCURACY_ROUNDING


@dataclass(frozen=True)
class StartMismatch:
    """A seed left out of a pair: its two runs started from different models although they were meant not to."""

    point: Point
    method: str
    baseline: str
    seed: int


def _paired_seeds(
    experiment: Experiment, by_key: Results, point: Point, method: str, baseline: str
) -> tuple[tuple[int, ...], list[StartMismatch]]:
    """The seeds both runs finished from one start, and those whose runs started apart."""
    seeds, apart = [], []
    for s in experiment.seeds:
        if (point, method, s) not in by_key or (point, baseline, s) not in by_key:
            continue
        if different_starts(by_key[(point, method, s)], by_key[(point, baseline, s)]):
            apart.append(StartMismatch(point, method, baseline, s))
        else:
            seeds.append(s)
    return tuple(seeds), apart


def _by_key(experiment: Experiment, results: Mapping[Cell, CellResult]) -> Results:
    return {(c.point, c.method, c.seed): results[c] for c in experiment.cells if c in results}


def start_mismatches(experiment: Experiment, results: Mapping[Cell, CellResult]) -> list[StartMismatch]:
    """Every seed left out of a ``compare`` pair because its runs started from different models."""
    by_key = _by_key(experiment, results)
    points = list(dict.fromkeys(c.point for c in experiment.cells))
    return [
        mismatch
        for point in points
        for method, baseline in experiment.compare.items()
        for mismatch in _paired_seeds(experiment, by_key, point, method, baseline)[1]
    ]


def paired_rows(experiment: Experiment, results: Mapping[Cell, CellResult]) -> list[PairedRow]:
    """Every ``compare`` pair at every grid point, over the seeds both finished from one start."""
    by_key = _by_key(experiment, results)
    points = list(dict.fromkeys(c.point for c in experiment.cells))
    rows = []
    for point in points:
        for method, baseline in experiment.compare.items():
            seeds, _ = _paired_seeds(experiment, by_key, point, method, baseline)
            if not seeds:
                continue
            pairs = [(by_key[(point, method, s)].summary, by_key[(point, baseline, s)].summary) for s in seeds]
            recorded = [
                f for f in ALSO_COMPARED if all(a.get(f) is not None and b.get(f) is not None for a, b in pairs)
            ]
            differences = {f: tuple(float(a[f]) - float(b[f]) for a, b in pairs) for f in [*COMPARED, *recorded]}
            rows.append(PairedRow(point, method, baseline, seeds, differences))
    return rows


def _points(values: Sequence[float]) -> str:
    return ", ".join(f"{100 * v:+.1f}" for v in values)


def _summary(values: Sequence[float]) -> str:
    mean, std = mean_std(values)
    if math.isnan(mean):
        return "–"
    wins = sum(v > 0 for v in values)
    spread = "" if std is None else f" ± {100 * std:.1f}"
    return f"{100 * mean:+.1f}{spread} ({wins}/{len(values)} seeds ahead)"


def paired_table(experiment: Experiment, rows: Sequence[PairedRow]) -> str:
    """Markdown: per pair, each field's per-seed differences (percentage points) and their mean ± std (– where a
    pair did not record the field)."""
    keys = list(experiment.grid)
    titles = {**COMPARED, **ALSO_COMPARED}
    fields = [f for f in titles if any(f in row.differences for row in rows)]
    header = [*keys, "method − baseline", "seeds"]
    for field in fields:
        header += [f"{titles[field]} per seed (pts)", f"{titles[field]} mean ± std"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        point = dict(row.point)
        cells = [str(point[k]) for k in keys] + [f"{row.method} − {row.baseline}", " ".join(map(str, row.seeds))]
        for field in fields:
            values = row.differences.get(field)
            cells += [_points(values), _summary(values)] if values is not None else ["–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_section(experiment: Experiment, results: Mapping[Cell, CellResult]) -> list[str]:
    """The summary's lines on the paired differences (none when the file compares nothing), and the seeds left out
    because their runs started from different models."""
    rows = paired_rows(experiment, results)
    apart = [
        f"{m.method} − {m.baseline}" + (f" at {point_label(m.point)}" if m.point else "") + f", seed {m.seed}"
        for m in start_mismatches(experiment, results)
    ]
    lines = []
    if rows:
        where = {point_label(r.point) for r in rows} - {""}
        lines += [
            "Paired differences (method − baseline on the same seed: same split, start and draws), in percentage"
            " points" + (f" at {', '.join(sorted(where))}" if where else "") + ":",
            "",
            paired_table(experiment, rows),
            "",
        ]
    if apart:
        lines += [
            "Left out of the paired differences, as their two runs started from different models although their"
            " start settings agree (a start made again between them): " + "; ".join(apart) + ".",
            "",
        ]
    return lines


@dataclass(frozen=True)
class PairedCurve:
    """One method against its baseline at one grid point, round by round: the per-seed differences of the test
    accuracy after each round (method − baseline, fractions), over the rounds every paired seed scored."""

    point: Point
    method: str
    baseline: str
    seeds: tuple[int, ...]
    rounds: tuple[int, ...]
    differences: tuple[tuple[float, ...], ...]  # per seed, per round

    def mean_std(self) -> tuple[list[float], list[float | None]]:
        """Per round: the mean over seeds and the sample std (None with one seed)."""
        means, stds = [], []
        for values in zip(*self.differences, strict=True):
            mean, std = mean_std(values)
            means.append(mean)
            stds.append(std)
        return means, stds


def _accuracy_by_round(result: CellResult) -> dict[int, float]:
    return {int(r["round"]): float(r["accuracy"]) for r in result.rounds if r.get("accuracy") is not None}


def paired_curves(experiment: Experiment, results: Mapping[Cell, CellResult]) -> list[PairedCurve]:
    """Every ``compare`` pair at every grid point, round by round, over the seeds both finished from one start (the
    paper's question of when a method's gain shows: FedFT-EDS §IV-F, most in the first rounds)."""
    by_key = _by_key(experiment, results)
    points = list(dict.fromkeys(c.point for c in experiment.cells))
    curves = []
    for point in points:
        for method, baseline in experiment.compare.items():
            seeds, _ = _paired_seeds(experiment, by_key, point, method, baseline)
            pairs = [
                (_accuracy_by_round(by_key[(point, method, s)]), _accuracy_by_round(by_key[(point, baseline, s)]))
                for s in seeds
            ]
            rounds = sorted(set.intersection(*(set(a) & set(b) for a, b in pairs))) if pairs else []
            if not rounds:
                continue
            differences = tuple(tuple(a[r] - b[r] for r in rounds) for a, b in pairs)
            curves.append(PairedCurve(point, method, baseline, seeds, tuple(rounds), differences))
    return curves
