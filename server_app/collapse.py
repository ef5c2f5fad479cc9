"""A run whose global model stops learning says so: in the round's log line and in summary.json's ``warnings``.

Two signs, both measured against the same scoring as the start (``models/batchnorm.py``):

- **at chance**: the model's test accuracy is at most ``CHANCE_MULTIPLE`` × 1/C (15% for 10 classes), that of a model
  that predicts one class for everything, although the start or an earlier round was above it (a model that never
  left chance, e.g. one trained from scratch for a round, is not a collapse);
- **far below the start**: more than ``FALL_POINTS`` percentage points below the initial model's accuracy.

A run that ends on either sign gets a warning in summary.json, as does one that passed through chance on the way. A
method that starts its model afresh on purpose (KAFAL's cycles from Ω⁰) starts the comparison afresh too: its rounds
are compared with those since the restart, not with the run's start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: At most this multiple of 1/C counts as chance level.
CHANCE_MULTIPLE = 1.5
#: A round this many percentage points below the start is "far below" it.
FALL_POINTS = 15.0


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


def run_warnings(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    """summary.json's ``warnings``, from the round records' own (``warning``): how the final model ended, and in which
    earlier rounds the model was at chance."""
    if not rounds:
        return []
    warnings = []
    final = rounds[-1]
    if final.get("warning"):
        warnings.append(f"the final model (round {final['round']}) is {final['warning']}")
    fell = [r["round"] for r in rounds[:-1] if str(r.get("warning", "")).startswith("at chance")]
    if fell:
        plural = "s" if len(fell) > 1 else ""
        warnings.append(f"the global model was at chance level in round{plural} {', '.join(map(str, fell))}")
    return warnings
