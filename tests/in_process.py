"""The tests' way into the in-process engine (``simulation/in_process.py``): the real ServerApp and ClientApp in one
process, without Ray or a SuperLink, on a run configuration small enough for seconds per round.

``run_in_process`` runs the engine with its server faults (``kill_at_round``, ``stop_at_round``, ``stop_at_start``),
keeps every message sent in the returned grid's ``sent`` and leaves torch's thread count as it found it. ``HANDLERS``
is the ClientApp's own table, which the engine reads at each message: a test replaces a handler with
``monkeypatch.setitem``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

import client_app.app as client
from run_config.defaults import load_defaults
from simulation.in_process import InProcessGrid, ServerFaults, ServerKilled, flower_stop
from simulation.in_process import run_in_process as run_engine
from tests.conftest import SHARED_PRETRAINING

HANDLERS = client.HANDLERS

__all__ = ["HANDLERS", "InProcessGrid", "ServerKilled", "flower_stop", "run_in_process", "small_run_config"]


def small_run_config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """A FedFT-EDS run on the synthetic dataset with LeNet-5, small enough for seconds per round. Its pretrained
    weights come from the session's cache (``SHARED_PRETRAINING``), unless the run has a pretraining round (whose
    output a test may expect to compute) or ``overrides`` name a cache of the test's own."""
    config = load_defaults()
    config.update(
        {
            "dataset": "synthetic",
            "model": "lenet5",
            "pretrain-epochs": 2,
            "pretrain-samples": 600,  # of the default pretraining source (MNIST): seconds, not a minute, for a WRN
            "num-server-rounds": 3,
            "local-epochs": 1,
            "batch-size": 32,
            "dirichlet-alpha": 0.5,
            "min-partition-size": 5,
            "results-dir": str(tmp_path / "results"),
            "run-name": "run",
            "node-wait-seconds": 0.0,
            "pretrain-cache-dir": str(tmp_path / "pretrained"),
            "feature-cache-dir": str(tmp_path / "features"),
            "client-threads": 1,
            # the pretraining round (a method's preset) is tested on its own (tests/test_pretraining_round_server.py);
            # the rest of the suite's small runs start from the server's pretraining alone
            "pretrain-round": False,
        }
    )
    config.update(overrides)
    shared = os.environ.get(SHARED_PRETRAINING)
    if shared and "pretrain-cache-dir" not in overrides and config["pretrain-round"] is False:
        config["pretrain-cache-dir"] = shared
    return config


def run_in_process(
    run_config: dict[str, Any],
    num_partitions: int = 4,
    kill_at_round: int | None = None,
    stop_at_round: int | None = None,
    stop_at_start: bool = False,
) -> InProcessGrid:
    """Run the ServerApp's main to the end (or until killed) against in-process clients."""
    faults = ServerFaults(kill_at_round, stop_at_round, stop_at_start)
    threads = torch.get_num_threads()  # the client sets its thread count; keep it from leaking into other tests
    try:
        return run_engine(run_config, num_partitions, faults=faults, record_sent=True)
    finally:
        torch.set_num_threads(threads)
