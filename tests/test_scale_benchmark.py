"""The scale benchmark's cross-device bookkeeping (``benchmarks/scale.py``): a round's seconds outside client
compute, and the table that puts the engine's estimate beside its peak."""

from __future__ import annotations

import pytest

from benchmarks.scale import cross_device_table, overhead


def test_overhead_is_the_wall_less_the_clients_training_shared_over_those_at_once() -> None:
    record = {"wall_seconds": 10.0, "client_stats": [{"train_seconds": 3.0}, {"train_seconds": 5.0}]}
    assert overhead(record, parallel=1) == pytest.approx(2.0)
    assert overhead(record, parallel=2) == pytest.approx(6.0)
    assert overhead({"wall_seconds": 4.0, "client_stats": []}, parallel=2) == pytest.approx(4.0)


def run(engine: str, **extra: object) -> dict:
    return {
        "clients": 100_000, "selection": "fedentopt", "engine": engine, "exit_code": 0, "total_seconds": 612.4,
        "round_overhead_seconds": [30.04, 2.56, 2.44], "peak_memory_gib": 6.0,
        "peak_by_kind_mib": {"simulation engine": 2048.0, "SuperLink": 1024.0, "client actor": 512.0,
                             "launcher": 1536.0},
        "load_average_before": [1.04], "load_average_after": [2.0], **extra,
    }  # fmt: skip


def test_the_cross_device_table_puts_the_engine_estimate_beside_its_peak() -> None:
    rows = cross_device_table([run("flower", estimate_gib=6.6), run("in-process"), run("flower", exit_code=1)])
    assert rows.splitlines()[2] == (
        "| 100,000 | fedentopt | flower | 1.4 | 612 | 30.0, 2.6, 2.4 | 6.00 | 2.00, 1.00, 0.50 | 6.60 | 1.10 "
        "| 1.0 → 2.0 |"
    )
    assert rows.splitlines()[3].startswith("| 100,000 | fedentopt | in-process | 1.4 | 612 | 30.0, 2.6, 2.4 | 6.00 "
                                           "| 1.50, –, – | – | – |")  # fmt: skip
    assert rows.splitlines()[4] == "| 100,000 | fedentopt | flower | 1.4 | failed: exit code 1 |"
