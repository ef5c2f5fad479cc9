"""The documented `flwr run .` commands (docs/running.md) work exactly as written for a new user (an empty home: the
server's pretraining and the pretraining round computed, not read from a cache): Flower's CLI from the virtual
environment, 10 simulated clients, the local SuperLink stopped afterwards by PID. The run is also the default suite's
one run in Flower's engine, so it checks the results contract every run writes and what FedFT-EDS sends (θ only, φ
once per client); each engine run costs Ray's start."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from flwr.app import ArrayRecord

from models import LeNet5
from simulation.local_run import PROJECT_DIR, free_port
from strategies.partial_model import split_state
from tests.test_end_to_end import described, processes_using

pytestmark = pytest.mark.e2e

ROUND_FIELDS = {
    "round",
    "accuracy",
    "loss",
    "clients",
    "num_examples",
    "client_train_seconds",
    "bytes_down",
    "bytes_up",
    "wall_seconds",
    "client_stats",
}
CLIENT_FIELDS = {"partition_id", "num_examples", "num_local", "train_seconds"}
SUMMARY_FIELDS = {
    "method",
    "rounds",
    "best_accuracy",
    "best_round",
    "final_accuracy",
    "total_client_train_seconds",
    "learning_efficiency",
    "nodes_refused",
    "label_counts_refused",
    "machine",
}


def readme_block(name: str) -> str:
    text = (PROJECT_DIR / "docs" / "running.md").read_text()
    block = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return "\n".join(line for line in block.strip().splitlines() if not line.startswith("```"))


def run_as_written(tmp_path: Path) -> tuple[str, Path]:
    """The documented commands in a new user's home: their output, and the run's folder, copied out of the project's
    results/."""
    commands = readme_block("flwr-run")
    assert "flwr run . " in commands and "num-supernodes=10" in commands
    flwr_home = tmp_path / "flwr-home"
    environment = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "FLWR_HOME": str(flwr_home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=PROJECT_DIR, env=environment, capture_output=True, text=True, timeout=600
    )
    log = done.stdout + done.stderr
    run = tmp_path / "run"
    written = re.search(r"results written to (\S+)", log)
    if written:
        shutil.copytree(written.group(1), run)
        shutil.rmtree(written.group(1), ignore_errors=True)  # the run's folder in the project's results/
    assert done.returncode == 0, log[-3000:]
    left = processes_using(flwr_home)
    assert left == [], f"the local SuperLink (or something it started) is still running: {described(left)}"
    return log, run


def test_the_readme_flwr_run_commands_run_as_written_and_write_the_results_contract(tmp_path: Path) -> None:
    log, run = run_as_written(tmp_path)
    assert "10 clients connected" in log and "round 2: accuracy" in log
    assert "stopped the local SuperLink" in log
    assert "pretraining epoch 2/2" in log  # computed: the new user's home has no cache

    config = json.loads((run / "config.json").read_text())
    assert config["method"] == "fedft-eds" and config["model"] == "lenet5" and config["num-server-rounds"] == 2
    phase, *rounds = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    frozen, trained = split_state(LeNet5(1, 10).state_dict(), LeNet5(1, 10).upper_state_keys("mid"))
    theta_bytes, phi_bytes = ArrayRecord(trained).count_bytes(), ArrayRecord(frozen).count_bytes()

    # The pretraining round (thesis §6.4.1 step 2): every client, the whole model both ways, all its data, at most the
    # command's 2 epochs; φ is frozen from its mean, which starts the federated rounds.
    assert (phase["round"], phase["phase"]) == (0, "pretraining-round")
    assert sorted(phase["clients"]) == list(range(10)) and set(phase["epochs"].values()) <= {1, 2}
    assert phase["bytes_down"] == phase["bytes_up"] == 10 * (theta_bytes + phi_bytes)
    assert phase["num_examples"] == sum(s["num_local"] for s in rounds[0]["client_stats"])
    # Real Fashion-MNIST images: the MNIST-pretrained model with a new head is near chance; the round lifts it.
    assert phase["pretrained_accuracy"] < 0.2 and phase["accuracy"] > phase["pretrained_accuracy"] + 0.1

    sent_phi: set[int] = set()
    for record in rounds:
        assert ROUND_FIELDS <= set(record)
        assert [s["partition_id"] for s in record["client_stats"]] == record["clients"]
        assert 0.0 <= record["accuracy"] <= 1.0 and record["client_train_seconds"] > 0
        new = set(record["clients"]) - sent_phi
        assert record["bytes_down"] == len(record["clients"]) * theta_bytes + len(new) * phi_bytes  # φ once a client
        assert record["bytes_up"] == len(record["clients"]) * theta_bytes  # replies carry θ only
        sent_phi |= new
        for stats in record["client_stats"]:
            assert CLIENT_FIELDS <= set(stats)
            # Flower's default of 2 CPUs a simulated client (client-resources-num-cpus): client-threads = 0 uses them
            assert stats["threads"] == 2
            assert stats["num_examples"] == math.ceil(0.1 * stats["num_local"])  # the top 10% by entropy
            assert stats["selected_entropy_mean"] > stats["local_entropy_mean"] > 0
            assert stats["selection_seconds"] > 0 and stats["cache_seconds"] >= 0
    assert sent_phi == set(range(10))

    summary = json.loads((run / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(summary)
    assert summary["rounds"] == 2 and summary["best_accuracy"] == max(r["accuracy"] for r in rounds)
    assert summary["best_accuracy"] > phase["accuracy"]  # two rounds of θ improve on the start
    assert (run / "model.pt").stat().st_size > 0
    # The server's pretraining and the pretraining round's output, one cached file each; one feature file a client.
    cache = tmp_path / "home" / ".cache" / "fedft"
    cached = sorted(p.name for p in (cache / "pretrained").glob("*.pt"))
    assert len(cached) == 2 and sum("-pretraining-round-" in name for name in cached) == 1, cached
    assert len(list((cache / "features").glob("*.npy"))) == 10
