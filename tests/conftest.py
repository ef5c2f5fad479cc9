"""Shared fixtures."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from methods.registry import default_config
from run_config.defaults import load_defaults

make_config = default_config  # the default configuration with snake_case overrides
#: Environment variable naming the test session's pretraining cache, which every worker inherits: the suite's small
#: runs (``tests/in_process.py``) pretrain each recipe once, instead of once per test (seconds each).
SHARED_PRETRAINING = "FEDFT_TEST_PRETRAINED"


@pytest.fixture(autouse=True)
def torch_threads_restored() -> Iterator[None]:
    """Every test ends with the torch thread count it started with. A ClientApp run in the test's process sets torch's
    threads from ``client-threads`` (every core by default, ``client_app/threads.py``); left so, the worker's later
    tests ran with two threads beside the other worker, and their OpenMP threads spin-waited for the cores: in
    a ``make test`` of 29 Nov 2026, 188 tests ran so, tests/test_cohort_training.py's cases among them at 13-29 s each
    against 0.3-1 s with one thread."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture
def defaults() -> dict[str, Any]:
    return load_defaults()


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory) -> Path:
    """One pretraining cache for the whole test session (the learns-tests share their pretrained start)."""
    return tmp_path_factory.mktemp("pretrained")


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread per xdist worker: ``make test`` runs two workers on two cores, and two threads each made
    the CPU-bound tests wait on each other's spinning OpenMP threads (a test that spawns its own processes sets theirs).
    The session's pretraining cache (``tests/in_process.py``), made by the main process before xdist starts the
    workers, which inherit its environment."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
    elif SHARED_PRETRAINING not in os.environ:
        folder = tempfile.mkdtemp(prefix="fedft-test-pretrained-")
        os.environ[SHARED_PRETRAINING] = folder
        config.add_cleanup(lambda: (shutil.rmtree(folder, ignore_errors=True), os.environ.pop(SHARED_PRETRAINING)))


#: Environment variable that runs the ``slow_e2e`` tests: Flower simulations of edge behaviours (a client actor that
#: dies, a run that trains nothing, a stopped run, a running Ray head, ...), 25-85 s each on the 2-core machine, kept
#: out of ``make test`` to hold it under 8 minutes (docs/development.md lists them with the command).
SLOW_E2E = "FEDFT_SLOW_E2E"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``e2e`` tests (Flower simulations and deployments, tens of seconds to minutes each) first, so that the
    two workers do not end the run with one of them still in a long test while the other is idle; the ``slow_e2e``
    ones skipped unless ``FEDFT_SLOW_E2E=1``."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)
    if os.environ.get(SLOW_E2E) != "1":
        skip = pytest.mark.skip(reason=f"opt-in (Flower simulation of an edge behaviour): set {SLOW_E2E}=1")
        for item in items:
            if item.get_closest_marker("slow_e2e") is not None:
                item.add_marker(skip)
