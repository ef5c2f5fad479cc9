"""A run whose global model stops learning says so: in the round's log line and in summary.json's ``warnings``.

Two signs, both measured against the same scoring as the start (``models/batchnorm.py``):

- **at chance**: the model's test accuracy is at most ``CHANCE_MULTIPLE`` × 1/C (15% for 10 classes), that of a model
  that predicts one class for everything, although the start or an earlier round was above it (a model that never
  left chance, e.g. one trained from scratch for a round, is not a collapse);
- **far below the start**: more than ``FALL_POINTS`` percentage points below the initial model's accuracy.

A run that ends on either sign gets a warning in summary.json, as does one that passed through chance on the way. A
method that starts its model afresh on purpose (KAFAL's cycles from Ω⁰) starts the comparison afresh too: its rounds
are compared with those since the restart, not with the run's start.

summary.json's ``warnings`` (also the last lines of the run's log) name three more signs that a run did not do what
it should, read from the round records:

- **never left chance**: every scored round at chance level (a model that does not learn at these settings);
- **non-finite updates**: a client's reply refused because its arrays hold NaN or infinite values (its local
  training diverged), with the client and the rounds;
- **a diverging client**: a client whose training loss in a round is more than ``DIVERGENCE_MULTIPLE`` times its
  lowest in earlier rounds and more than twice ln C (the loss of predicting every class alike), i.e. its local
  training ran away from where it had been, often the round before its update turns non-finite. (At once above ln C
  and ten times its lowest is common for a client that trains rarely, whose first batches meet a model moved on: in
  the runs recorded under measurements/, 2.3-3.3 against 0.1-0.3; twice ln C leaves the losses of 4.8-133.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: At most this multiple of 1/C counts as chance level.
CHANCE_MULTIPLE = 1.5
#: A round this many percentage points below the start is "far below" it.
FALL_POINTS = 15.0
#: A client's training loss this many times its lowest in earlier rounds, and above ``DIVERGENCE_UNIFORM_MULTIPLE``
#: times ln C, is diverging.
DIVERGENCE_MULTIPLE = 10.0
DIVERGENCE_UNIFORM_MULTIPLE = 2.0
#: What the reply checks (``protocol/replies.py``) say of an array with NaN or infinite values.
NON_FINITE = "NaN or infinite"


def chance_level(num_classes: int) -> float:
    """The accuracy (fraction) at or below which a model counts as at chance."""
    return CHANCE_MULTIPLE / num_classes


def round_warning(accuracy: float, earlier: Sequence[float | None], num_classes: int) -> str | None:
    """What is wrong with a round's accuracy, given the start's and the earlier rounds' (``earlier[0]`` is the
    start, ``None`` when it was not scored), or None. Fractions in [0, 1]."""
    chance = chance_level(num_classes)
    known = [a for a in earlier if a is not None]
    if accuracy <= chance and any(a > chance for a in known):
        return f"at chance level (≤ {100 * chance:.0f}% for {num_classes} classes) after being above it"
    start = earlier[0] if earlier else None
    if start is not None and 100 * (start - accuracy) > FALL_POINTS:
        return f"{100 * (start - accuracy):.1f} points below the start ({100 * start:.1f}%)"
    return None


def run_warnings(rounds: Sequence[Mapping[str, Any]], num_classes: int) -> list[str]:
    """summary.json's ``warnings``, from the round records: how the final model ended (the rounds' own
    ``warning``), in which earlier rounds the model was at chance, whether it ever left chance, and the clients whose
    updates were refused as non-finite or whose training loss diverged."""
    if not rounds:
        return []
    warnings = []
    final = rounds[-1]
    if final.get("warning"):
        warnings.append(f"the final model (round {final['round']}) is {final['warning']}")
    fell = [r["round"] for r in rounds[:-1] if str(r.get("warning", "")).startswith("at chance")]
    if fell:
        warnings.append(f"the global model was at chance level in {_rounds(fell)}")
    if never_left_chance(rounds, num_classes):
        scored = sum(1 for r in rounds if r.get("accuracy") is not None)
        warnings.append(
            f"the global model never left chance level (≤ {100 * chance_level(num_classes):.0f}% for {num_classes} "
            f"classes) in {scored} scored round{'s' if scored > 1 else ''}: it did not learn at these settings"
        )
    warnings.extend(
        f"client {pid}'s update was refused for NaN or infinite values in {_rounds(refused)}: its local training "
        "diverged"
        for pid, refused in sorted(non_finite_refusals(rounds).items())
    )
    warnings.extend(
        f"client {pid}'s training loss diverged: "
        + "; ".join(f"{loss:.3g} in round {rnd} (its lowest before: {lowest:.3g})" for rnd, loss, lowest in losses)
        for pid, losses in sorted(diverging_losses(rounds, num_classes).items())
    )
    return warnings


def never_left_chance(rounds: Iterable[Mapping[str, Any]], num_classes: int) -> bool:
    """Every scored round at chance level, none flagged as fallen there (which the round warnings already say)."""
    scored = [r for r in rounds if r.get("accuracy") is not None]
    return bool(scored) and all(
        r["accuracy"] <= chance_level(num_classes) and not str(r.get("warning", "")).startswith("at chance")
        for r in scored
    )


def non_finite_refusals(rounds: Iterable[Mapping[str, Any]]) -> dict[int, list[int]]:
    """Partition id -> the rounds in which its reply was refused for NaN or infinite values."""
    refused: dict[int, list[int]] = {}
    for record in rounds:
        for item in record.get("rejected") or []:
            if NON_FINITE in str(item.get("reason", "")):
                refused.setdefault(int(item["partition_id"]), []).append(int(record["round"]))
    return refused


def diverging_losses(
    rounds: Iterable[Mapping[str, Any]], num_classes: int
) -> dict[int, list[tuple[int, float, float]]]:
    """Partition id -> (round, training loss, its lowest in earlier rounds) for each round in which the client's
    training loss was more than ``DIVERGENCE_MULTIPLE`` times its earlier lowest and more than twice ln C."""
    floor = DIVERGENCE_UNIFORM_MULTIPLE * math.log(num_classes)
    lowest: dict[int, float] = {}
    diverged: dict[int, list[tuple[int, float, float]]] = {}
    for record in rounds:
        for stats in record.get("client_stats") or []:
            pid, loss = int(stats["partition_id"]), stats.get("train_loss")
            if not isinstance(loss, int | float) or not math.isfinite(loss):
                continue
            before = lowest.get(pid)
            if before is not None and loss > floor and loss > DIVERGENCE_MULTIPLE * before:
                diverged.setdefault(pid, []).append((int(record["round"]), float(loss), before))
            lowest[pid] = loss if before is None else min(before, loss)
    return diverged


def _rounds(numbers: Sequence[int]) -> str:
    """ "round 3", "rounds 1, 3" or "rounds 5-10" (runs of consecutive rounds joined)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)
    return f"round{'s' if len(numbers) > 1 else ''} {text}"
