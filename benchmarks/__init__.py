"""Benchmarks: commands that measure, and write what they measured to benchmarks/results/."""
