"""Timestamps of a run's phases (``profiling.spans``), read by ``python -m benchmarks default-run``."""
