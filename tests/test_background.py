"""Pretraining in the background while the clients connect: its failure is never hidden, a failed start stops it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from protocol.messages import IDENTIFY
from server_app.background import Background, Cancelled
from server_app.run_errors import RunSetupError
from strategies.client_population import ClientPopulation
from tests.fake_grid import FakeGrid, identify_reply
from tests.in_process import run_in_process, small_run_config


def test_result_is_the_value_and_the_thread_a_daemon() -> None:
    task = Background(lambda stop: 42, "answer")
    assert task.result() == 42 and task._thread.daemon
    task.check()  # succeeded: nothing to raise


def test_a_failure_is_raised_by_result_and_by_check() -> None:
    def fail(stop: threading.Event) -> int:
        raise ValueError("no data")

    task = Background(fail, "failing")
    with pytest.raises(ValueError, match="no data"):
        task.result()
    with pytest.raises(ValueError, match="no data"):
        task.check()


def test_check_does_not_wait_for_a_running_computation() -> None:
    release = threading.Event()
    task = Background(lambda stop: release.wait(10), "blocked")
    task.check()  # still running: returns at once
    release.set()
    assert task.result() is True


def test_cancel_stops_a_computation_that_watches_its_event() -> None:
    def loop(stop: threading.Event) -> None:
        while not stop.wait(0.01):
            pass
        raise Cancelled("stopped")

    task = Background(loop, "loop")
    task.cancel(wait=5.0)
    assert task.done()
    with pytest.raises(Cancelled):
        task.result()


def test_a_failed_background_ends_the_wait_for_clients_at_once() -> None:
    grid = FakeGrid([101], {IDENTIFY: identify_reply({101: 0, 102: 1}, 2, {0: 10, 1: 10})})  # one of two: waits
    population = ClientPopulation(wait_seconds=60)

    def failed() -> None:
        raise ValueError("pretraining failed")

    tick = time.monotonic()
    with pytest.raises(ValueError, match="pretraining failed"):
        population.available(grid, while_waiting=failed)
    assert time.monotonic() - tick < 5


def test_an_impossible_run_is_refused_and_its_pretraining_cancelled(tmp_path: Path) -> None:
    """The population check fails as soon as the clients have answered; the pretraining started in the background
    (10,000 epochs: minutes) is stopped before the ServerApp reports the failure, instead of running on (a process
    ending while torch computes in a thread aborts)."""
    config = small_run_config(
        tmp_path,
        **{"pretrain-epochs": 10_000, "min-train-nodes": 50, "pretrain-cache-dir": str(tmp_path / "pretrained")},
    )
    with pytest.raises(RunSetupError, match="min-train-nodes"):
        run_in_process(config)
    assert not any(t.name == "pretraining" for t in threading.enumerate())
    assert not (tmp_path / "pretrained").exists() or not any((tmp_path / "pretrained").iterdir())
