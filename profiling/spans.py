"""Timestamps of a run's phases, written only when a profile is asked for.

Every process of a run (the launcher, the ServerApp, each ClientApp) wraps its phases in ``span(NAME)``. With the
environment variable ``FEDFT_PROFILE_DIR`` naming a folder, a finished span appends one JSON line (name, wall-clock
start and end, process id and the span's attributes such as the round) to ``<folder>/spans-<pid>.jsonl``; without
it a span costs a dictionary lookup. Wall-clock time (``time.time``) is what processes on one machine share, so the
spans of the server and of its clients can be laid on one time line (``benchmarks/measured_run.py`` does).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The environment variable naming the folder spans are written to (unset: no spans).
PROFILE_DIR_ENV = "FEDFT_PROFILE_DIR"

# The launcher and the ServerApp as a whole.
LAUNCH, SERVER = "launch", "server"
# The server's phases before the rounds, and after them.
SETUP, NODE_WAIT, LABEL_COUNTS, PRETRAINING, FINISH = "setup", "node-wait", "label-counts", "pretraining", "finish"
# The server's steps of a round, in order; EXCHANGE is the wait for the clients' replies.
SAMPLING, ENCODE, EXCHANGE, DECODE, AGGREGATION = "sampling", "encode", "exchange", "decode", "aggregation"
EVALUATION, RESULTS, CHECKPOINT = "evaluation", "results", "checkpoint"
# A client's handling of one message, and its parts.
CLIENT_MESSAGE, CLIENT_DATA, CLIENT_DECODE, CLIENT_COMPUTE = (
    "client-message",
    "client-data",
    "client-decode",
    "client-compute",
)

_lock = threading.Lock()


def profile_dir() -> Path | None:
    """The folder spans go to, or None when no profile is being taken."""
    folder = os.environ.get(PROFILE_DIR_ENV)
    return Path(folder) if folder else None


def _write(folder: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record) + "\n"
    with _lock, (folder / f"spans-{os.getpid()}.jsonl").open("a") as handle:
        handle.write(line)


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    """Record the wall-clock start and end of the enclosed block as ``name`` (nothing when no profile is taken)."""
    folder = profile_dir()
    if folder is None:
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        _write(folder, {"name": name, "start": start, "end": time.time(), "pid": os.getpid(), **attributes})


def read_spans(folder: Path) -> list[dict[str, Any]]:
    """Every span the processes of a profiled run wrote to ``folder``, in order of their start."""
    spans = []
    for path in sorted(folder.glob("spans-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                spans.append(json.loads(line))
            except json.JSONDecodeError:  # the last line of a process killed while writing it
                continue
    return sorted(spans, key=lambda s: (s["start"], -s["end"]))
