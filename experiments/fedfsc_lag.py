"""FedFSC(+)'s global model against its base trainer, split in two measured terms, round by round: the report's
``decomposition.md``, written for an experiment whose cells made few-shot updates.

A FedFSC-family run records each round t its global model's accuracy acc(t) and its base model's base(t), which is
the base trainer's own model at round t (bit for bit; tests/test_fedfsc_method.py). The global model is
w_g^t = {θ_fs^t, φ^t} (thesis Alg. 1 line 16): the averaged few-shot classifier on the extractor of the base model
*distributed* at round t, which is the base of round t − 1. Hence, exactly,

    acc(t) − base(t) = [acc(t) − base(t − 1)] − [base(t) − base(t − 1)]
                     =   classifier gain          −  extractor lag

the few-shot classifier's gain over the base classifier on the same extractor φ^t (what eq. 4.1-4.2 add), minus
what the base trainer gained in round t (what the one-round-old extractor costs). Round 1 has no few-shot updates
(Alg. 1 line 7), so the terms run over rounds 2..T.

Beside them, each round's *coverage*: how many classes at least one few-shot participant trained on (a class takes
part where a client holds at least n samples of it; ``methods.fedfsc.fewshot.eligible_classes``, from the run's
label_counts.json). A class no few-shot participant holds only has its logit pushed down by the others'
cross-entropy, so the averaged classifier can only debias the classes the round covers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from experiments.cell_results import CellResult
from experiments.spec import Cell, Experiment
from experiments.summary import mean_std
from methods.fedfsc.fewshot import eligible_classes
from server_app.results import LABEL_COUNTS_FILE

DECOMPOSITION_FILE = "decomposition.md"
#: The last rounds the late columns average over (as the summary's last-10 mean accuracy).
LATE_ROUNDS = 10


@dataclass(frozen=True)
class Decomposition:
    """acc(t) − base(t), its two terms and the round's coverage, for rounds 2..T of one run (fractions)."""

    gap: tuple[float, ...]  # acc(t) − base(t): the global model against the base trainer's model
    classifier_gain: tuple[float, ...]  # acc(t) − base(t − 1): θ_fs^t against θ^t, both on φ^t
    extractor_lag: tuple[float, ...]  # base(t) − base(t − 1): what the base gained in round t
    coverage: tuple[int, ...]  # classes at least one few-shot participant trained on
    num_classes: int


def covered_classes(counts: Sequence[Sequence[float]], shots: int) -> int:
    """How many classes at least one of the clients with these label counts few-shot trains on."""
    covered = torch.zeros(len(counts[0]), dtype=torch.bool) if counts else torch.zeros(0, dtype=torch.bool)
    for client in counts:
        labels = torch.repeat_interleave(torch.arange(len(client)), torch.tensor(client).round().long())
        covered |= eligible_classes(labels, shots, len(client))[0]
    return int(covered.sum())


def decompose(
    rounds: Sequence[Mapping[str, Any]], label_counts: Mapping[int, Sequence[float]], shots: int
) -> Decomposition:
    """The terms of each round from 2 on, from a FedFSC-family run's round records (``accuracy``,
    ``base_accuracy`` and ``fewshot_clients``, in round order) and its clients' label counts."""
    if len(rounds) < 2:
        raise ValueError(f"the decomposition needs at least 2 rounds, got {len(rounds)}")
    if any(r["accuracy"] is None for r in rounds):
        raise ValueError("the decomposition needs every round evaluated (evaluate-every = 1)")
    acc = [float(r["accuracy"]) for r in rounds]
    base = [float(r["base_accuracy"]) for r in rounds]
    later = range(1, len(rounds))
    return Decomposition(
        gap=tuple(acc[t] - base[t] for t in later),
        classifier_gain=tuple(acc[t] - base[t - 1] for t in later),
        extractor_lag=tuple(base[t] - base[t - 1] for t in later),
        coverage=tuple(covered_classes([label_counts[p] for p in rounds[t]["fewshot_clients"]], shots) for t in later),
        num_classes=len(next(iter(label_counts.values()))),
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def cell_row(decomposition: Decomposition, late: int = LATE_ROUNDS) -> dict[str, float]:
    """Means over rounds 2..T and over the last ``late`` rounds of each term; the share of rounds where the few-shot
    classifier beat the base classifier on the same extractor; the mean coverage, and the classifier gain in the
    rounds that covered every class and in those that did not (NaN where there were none)."""
    d = decomposition
    full = [g for g, c in zip(d.classifier_gain, d.coverage) if c == d.num_classes]
    partial = [g for g, c in zip(d.classifier_gain, d.coverage) if c < d.num_classes]
    return {
        "gap": _mean(d.gap),
        "classifier_gain": _mean(d.classifier_gain),
        "extractor_lag": _mean(d.extractor_lag),
        "late_gap": _mean(d.gap[-late:]),
        "late_classifier_gain": _mean(d.classifier_gain[-late:]),
        "late_extractor_lag": _mean(d.extractor_lag[-late:]),
        "classifier_wins": sum(g > 0 for g in d.classifier_gain) / len(d.classifier_gain),
        "coverage": _mean(d.coverage),
        "full_coverage_gain": _mean(full),
        "partial_coverage_gain": _mean(partial),
    }


def read_decompositions(results: Mapping[Cell, CellResult]) -> dict[str, dict[str, float]]:
    """Cell name -> ``cell_row``, for every finished cell with few-shot updates (FedFSC, FedFSC+, FedFSC+(B+)), in
    the order of the cells' names."""
    rows = {}
    for cell, result in sorted(results.items(), key=lambda item: item[0].name):
        if len(result.rounds) < 2 or not any(r.get("fewshot_updates") for r in result.rounds):
            continue
        counts = json.loads(result.files[LABEL_COUNTS_FILE])
        label_counts = {int(pid): values for pid, values in counts.items()}
        shots = int(result.config["fedfsc.fewshot-shots"])
        rows[cell.name] = cell_row(decompose(result.rounds, label_counts, shots))
    return rows


#: Row fields in points (signed), with their column titles.
POINTS = {
    "gap": "acc − base",
    "classifier_gain": "classifier gain",
    "extractor_lag": "extractor lag",
    "late_gap": "acc − base, last 10",
    "late_classifier_gain": "classifier gain, last 10",
    "late_extractor_lag": "extractor lag, last 10",
    "full_coverage_gain": "classifier gain, all classes covered",
    "partial_coverage_gain": "classifier gain, some not covered",
}


def _cell(values: Sequence[float], text: str) -> str:
    present = [v for v in values if v == v]  # NaN: the cell had no such round
    if not present:
        return "–"
    mean, std = mean_std(present)
    spread = "" if std is None else f" ± {std:.1f}"
    seeds = "" if len(present) == len(values) else f" ({len(present)} seed{'' if len(present) == 1 else 's'})"
    return text.format(mean) + spread + seeds


def markdown(rows: Mapping[str, Mapping[str, float]]) -> str:
    """Per method and grid point (cells without their ``__seed<s>``), each term's mean over rounds in points, as
    mean ± std over seeds; the share of rounds the classifier won on the same extractor; the mean coverage."""
    groups: dict[str, list[Mapping[str, float]]] = {}
    for name, row in rows.items():
        groups.setdefault(name.rsplit("__seed", 1)[0], []).append(row)
    header = ["method and grid point", "seeds", *POINTS.values(), "rounds the classifier won", "classes covered"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group, members in groups.items():
        cells = [group, str(len(members))]
        cells += [_cell([100 * m[key] for m in members], "{:+.1f}") for key in POINTS]
        cells.append(_cell([100 * m["classifier_wins"] for m in members], "{:.0f}%"))
        cells.append(_cell([m["coverage"] for m in members], "{:.1f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PREAMBLE = """# {name}: FedFSC(+) against its base trainer, round by round

Written by `python -m experiments report`. For each round t ≥ 2 of a run with few-shot updates, in points:
acc − base = acc(t) − base(t), the global model {{θ_fs^t, φ^t}} against the base trainer's model at round t;
classifier gain = acc(t) − base(t − 1), the averaged few-shot classifier against the base classifier on the same
extractor φ^t; extractor lag = base(t) − base(t − 1), what the base trainer gained in round t, which the global
model, on the extractor distributed at round t, does not have yet (thesis Alg. 1 line 16). acc − base = classifier
gain − extractor lag. Means over rounds 2..T (and the last 10), then mean ± std over seeds; coverage: classes at
least one few-shot participant trained on (10 = all).
"""


def write_decomposition_report(
    experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path
) -> list[Path]:
    """``decomposition.md`` when some finished cell made few-shot updates; returns the files written."""
    rows = read_decompositions(results)
    if not rows:
        return []
    path = directory / DECOMPOSITION_FILE
    path.write_text(PREAMBLE.format(name=experiment.name) + "\n" + markdown(rows) + "\n")
    return [path]
