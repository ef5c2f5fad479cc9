"""``flwr run`` in Flower's simulation engine, on a private SuperLink, checked through the results files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simulation.local_run import run_simulation

ROUND_FIELDS = {
    "round", "accuracy", "loss", "clients", "num_examples", "client_train_seconds",
    "bytes_down", "bytes_up", "wall_seconds", "client_stats",
}
CLIENT_FIELDS = {"partition_id", "num_examples", "num_local", "train_seconds"}
SUMMARY_FIELDS = {
    "method", "rounds", "best_accuracy", "best_round", "final_accuracy",
    "total_client_train_seconds", "learning_efficiency",
}


def processes_using(flwr_home: Path) -> list[int]:
    """PIDs of live processes whose environment or command line names ``flwr_home``."""
    needle = str(flwr_home).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes() or needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def simulate(tmp_path: Path, overrides: dict, num_supernodes: int = 3) -> tuple[int, str]:
    flwr_home = tmp_path / "flwr-home"
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        code = run_simulation(
            {"results-dir": str(tmp_path / "results"), "node-wait-seconds": 60.0, **overrides},
            num_supernodes=num_supernodes,
            flwr_home=flwr_home,
            stream_to=out,
            timeout=400,
        )
    assert processes_using(flwr_home) == [], "a SuperLink, SuperExec or Ray process was left running"
    return code, log.read_text(errors="replace")


@pytest.mark.e2e
def test_fedavg_run_writes_the_results_contract(tmp_path: Path) -> None:
    overrides = {
        "model": "lenet5", "num-server-rounds": 2, "local-epochs": 1, "learning-rate": 0.05,
        "momentum": 0.9, "run-name": "e2e", "partitioner": "iid",
    }
    code, log = simulate(tmp_path, overrides)
    assert code == 0, log[-3000:]
    run = tmp_path / "results" / "e2e"
    config = json.loads((run / "config.json").read_text())
    assert config["model"] == "lenet5" and config["num-server-rounds"] == 2

    rounds = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    for record in rounds:
        assert ROUND_FIELDS <= set(record)
        assert sorted(record["clients"]) == [0, 1, 2]
        assert [s["partition_id"] for s in record["client_stats"]] == record["clients"]
        assert all(CLIENT_FIELDS <= set(s) for s in record["client_stats"])
        assert record["num_examples"] == 5400  # 6,000 mini training images less the 10% public split
        assert record["bytes_down"] == record["bytes_up"] > 3 * 61_706 * 4  # three full LeNet-5 models
        assert 0.0 <= record["accuracy"] <= 1.0 and record["client_train_seconds"] > 0

    summary = json.loads((run / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(summary)
    assert summary["rounds"] == 2 and summary["best_accuracy"] == max(r["accuracy"] for r in rounds)
    # Real Fashion-MNIST images: two rounds lift the model well above chance (10%).
    assert summary["initial_accuracy"] < 0.2 and summary["best_accuracy"] > 0.5
    assert (run / "model.pt").stat().st_size > 0
    assert "round 1: accuracy" in log and "round 2: accuracy" in log


@pytest.mark.e2e
def test_invalid_config_stops_before_training_naming_the_key(tmp_path: Path) -> None:
    code, log = simulate(tmp_path, {"fraction-train": 1.5, "run-name": "bad"}, num_supernodes=2)
    assert code != 0
    assert "'fraction-train' = 1.5 is invalid: it must be in (0, 1]" in log
    assert "round 1: accuracy" not in log
    assert not (tmp_path / "results" / "bad" / "rounds.jsonl").exists()
