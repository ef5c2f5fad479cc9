"""Benchmarks: commands that measure the app and write what they measured to measurements/benchmarks/.

``python -m benchmarks`` lists them (``benchmarks/__main__.py``); each module has ``main(argv)``, its command, and
``recorded_figure()``, its last recorded figure as Markdown, read from the files it wrote (docs/benchmarks.md shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
#: Where every benchmark writes its results (outside the code packages).
RESULTS_DIR = PROJECT_DIR / "measurements" / "benchmarks"


def command_line(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m benchmarks NAME``; its ``--help`` shows the benchmark's docstring ``doc``."""
    return argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def json_lines(result: dict[str, object]) -> str:
    """``result`` as JSON with each top-level key on a line and each item of a list value on its own: readable diffs,
    and smaller than indented JSON (the recorded results live in git; pfl_side_by_side.json: 101 KB against 174 KB)."""
    parts = []
    for key, value in result.items():
        if isinstance(value, list):
            body = ",\n".join(json.dumps(item) for item in value)
            parts.append(f"{json.dumps(key)}: [\n{body}\n]" if value else f"{json.dumps(key)}: []")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def commit_of(checkout: Path = PROJECT_DIR) -> str:
    """The short commit ``checkout`` has checked out; ``unknown`` outside a git checkout."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


class LoadWatch:
    """The highest 1-minute load average seen while it runs (a background thread sampling every few seconds)."""

    def __init__(self, every_seconds: float = 5.0) -> None:
        self.at_start = self.highest = os.getloadavg()[0]
        self._every = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._every):
            self.highest = max(self.highest, os.getloadavg()[0])

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
