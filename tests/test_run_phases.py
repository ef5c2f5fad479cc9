"""The profile of a run: its phases add up to the wall time, and every round's steps are in it."""

from __future__ import annotations

import time

import pytest

from benchmarks.measured_run import CLIENT_OTHER, OTHER, STARTUP, TRANSFER, profile
from profiling.spans import (
    AGGREGATION,
    CHECKPOINT,
    CLIENT_COMPUTE,
    CLIENT_DATA,
    CLIENT_DECODE,
    DECODE,
    ENCODE,
    EVALUATION,
    EXCHANGE,
    LAUNCH,
    PROFILE_DIR_ENV,
    RESULTS,
    SAMPLING,
    SERVER,
    read_spans,
    span,
)
from tests.in_process import run_in_process, small_run_config


def test_a_profiled_in_process_run_adds_up_to_its_wall_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path / "profile"))
    (tmp_path / "profile").mkdir()
    tick = time.time()
    run_in_process(small_run_config(tmp_path, **{"num-server-rounds": 3}))
    wall = time.time() - tick
    result = profile(read_spans(tmp_path / "profile"))
    assert result.phase_total() == pytest.approx(result.wall_seconds, abs=1e-6)
    assert result.wall_seconds == pytest.approx(wall, abs=0.05 + 0.02 * wall)  # the server span is the whole run
    assert sorted(result.rounds) == [1, 2, 3]
    for phases in result.rounds.values():
        for step in (SAMPLING, ENCODE, CLIENT_DATA, CLIENT_DECODE, CLIENT_COMPUTE, DECODE, AGGREGATION):
            assert phases.get(step, 0.0) > 0.0, step
        for step in (EVALUATION, RESULTS, CHECKPOINT):
            assert phases.get(step, 0.0) > 0.0, step
    assert sum(result.client_seconds[1].values()) > 0.0
    assert result.start.get("pretraining", 0.0) > 0.0


def test_an_instant_goes_to_the_innermost_step_or_to_what_the_clients_do() -> None:
    spans = [
        {"name": LAUNCH, "start": 0.0, "end": 20.0},
        {"name": SERVER, "start": 2.0, "end": 19.0},
        {"name": SAMPLING, "start": 3.0, "end": 4.0, "round": 1},
        {"name": EXCHANGE, "start": 4.0, "end": 12.0},
        {"name": "client-message", "start": 5.0, "end": 11.0},
        {"name": CLIENT_COMPUTE, "start": 6.0, "end": 9.0},
        {"name": "client-message", "start": 7.0, "end": 10.5},
        {"name": "finish", "start": 15.0, "end": 18.0},
    ]
    result = profile(spans)
    assert result.wall_seconds == 20.0 and result.phase_total() == pytest.approx(20.0)
    assert result.start == {STARTUP: 2.0, OTHER: 1.0}
    assert result.rounds[1] == pytest.approx(
        {SAMPLING: 1.0, TRANSFER: 1.0 + 1.0, CLIENT_OTHER: 1.0 + 2.0, CLIENT_COMPUTE: 3.0, OTHER: 3.0}
    )
    assert result.end == pytest.approx({"finish": 3.0, OTHER: 1.0, "shutdown": 1.0})
    assert result.client_seconds[1] == pytest.approx({CLIENT_OTHER: 6.0 + 3.5, CLIENT_COMPUTE: 3.0})


def test_spans_are_written_only_when_a_profile_is_asked_for(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(PROFILE_DIR_ENV, raising=False)
    with span(SAMPLING, round=1):
        pass
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    with span(SAMPLING, round=2):
        pass
    assert [(s["name"], s["round"]) for s in read_spans(tmp_path)] == [(SAMPLING, 2)]
