"""Every registered method runs on its own defaults: ``method=<name>`` and nothing else passes the launcher's checks
and starts its run (settings, data, population, the method's start checks, its first round's messages) on the
default dataset and population (10 clients). Only pretraining is shortened, and the pretraining round is left out
(FedAvg's took 286 s at its defaults, 60 s at one epoch; tests/test_pretraining_round_*.py test it): they are not what
is under test."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from methods.registry import METHODS
from run_config.defaults import load_defaults
from simulation.__main__ import check
from tests.in_process import ServerKilled, run_in_process

#: The population ``make run`` simulates.
DEFAULT_CLIENTS = 10


@pytest.mark.parametrize("name", list(METHODS))
def test_the_launcher_accepts_the_method_alone(name: str) -> None:
    args = argparse.Namespace(
        run_config=f"method='{name}'",
        num_supernodes=DEFAULT_CLIENTS,
        cpus_per_client=1,
        gpus_per_client=0.0,
        ray_address="",
    )
    check(args)


#: Defaults a method's first round would spend minutes on before the kill, left out: FedMD's transfer learning (10
#: epochs of each client's WRN-16-1 on the 1,000 public images, on the server before its first round: 9 minutes
#: here; tests/test_custom_size_models.py tests it).
SHORTER: dict[str, dict[str, int]] = {"fedmd": {"fedkad.fedmd-public-epochs": 0}}


@pytest.mark.parametrize("name", list(METHODS))
def test_the_method_alone_starts_its_first_round(name: str, tmp_path: Path, pretrained: Path) -> None:
    config = {
        **load_defaults(),
        "method": name,
        "pretrain-epochs": 1,
        "pretrain-samples": 300,
        "pretrain-round": False,
        "pretrain-cache-dir": str(pretrained),
        "results-dir": str(tmp_path / "results"),
        "run-name": "run",
        "node-wait-seconds": 0.0,
        "feature-cache-dir": str(tmp_path / "features"),
        "client-threads": 1,
        **SHORTER.get(name, {}),
    }
    with pytest.raises(ServerKilled, match="killed at the start of round 1"):
        run_in_process(config, DEFAULT_CLIENTS, kill_at_round=1)
