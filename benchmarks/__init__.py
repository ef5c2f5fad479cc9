"""Benchmarks: commands that measure the app and write what they measured to measurements/benchmarks/.

``python -m benchmarks`` lists them (``benchmarks/__main__.py``); each module has ``main(argv)``, its command, and
``recorded_figure()``, its last recorded figure as Markdown, read from the files it wrote (docs/benchmarks.md shows it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
#: Where every benchmark writes its results (outside the code packages).
RESULTS_DIR = PROJECT_DIR / "measurements" / "benchmarks"


def command_line(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m benchmarks NAME``; its ``--help`` shows the benchmark's docstring ``doc``."""
    return argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
