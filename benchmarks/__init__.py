"""Benchmarks: commands that measure, and write what they measured to measurements/benchmarks/."""

from pathlib import Path

#: Where every benchmark writes its results (outside the code packages).
RESULTS_DIR = Path(__file__).resolve().parents[1] / "measurements" / "benchmarks"
