"""The runner's progress line: cells done, the current cell's round and accuracy, time spent and left."""

from __future__ import annotations

import math


def format_duration(seconds: float | None) -> str:
    """``75`` -> ``1m15s``; ``None`` (not known yet) -> ``?``."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def seconds_left(elapsed: float, rounds_done: float, rounds_total: float) -> float | None:
    """Time left if the remaining rounds take as long on average as those done in this invocation
    (cell start-up included); ``None`` before the first round has finished."""
    if rounds_done <= 0:
        return None
    return elapsed / rounds_done * max(rounds_total - rounds_done, 0.0)


def progress_line(
    *,
    cells_done: int,
    cells_total: int,
    cell: str,
    server_round: int,
    num_rounds: int,
    accuracy: float | None,
    elapsed: float,
    left: float | None,
) -> str:
    """``[2/6 cells] fedft-eds__seed0: round 3/10, accuracy 61.20% | 4m10s elapsed, ≈ 9m05s left``."""
    acc = f", accuracy {100 * accuracy:.2f}%" if accuracy is not None else ""
    return (
        f"[{cells_done}/{cells_total} cells] {cell}: round {server_round}/{num_rounds}{acc} | "
        f"{format_duration(elapsed)} elapsed, ≈ {format_duration(left)} left"
    )
