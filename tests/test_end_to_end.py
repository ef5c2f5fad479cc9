"""``flwr run`` in Flower's simulation engine, on a private SuperLink, checked through the results files: the edge
behaviours (opt-in ``slow_e2e`` runs, each paying Ray's start). The default suite's engine run is the documented
command's, which also checks the results contract (tests/test_documented_simulation.py)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from flwr.app import ArrayRecord

from models import LeNet5
from simulation.local_run import run_simulation
from strategies.partial_model import split_state


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


def described(pids: list[int]) -> str:
    """Each PID with its parent and command line (what a leftover process was, for the failure's message)."""
    lines = []
    for pid in pids:
        try:
            command = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            command, parent = "(ended meanwhile)", "?"
        lines.append(f"{pid} (parent {parent}): {command[:300]}")
    return "; ".join(lines)


def simulate(tmp_path: Path, overrides: dict, num_supernodes: int = 3) -> tuple[int, str]:
    flwr_home = tmp_path / "flwr-home"
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        code = run_simulation(
            {
                "results-dir": str(tmp_path / "results"),
                "feature-cache-dir": str(tmp_path / "features"),
                "node-wait-seconds": 60.0,
                **overrides,
            },
            num_supernodes=num_supernodes,
            flwr_home=flwr_home,
            stream_to=out,
            timeout=400,
        )
    left = processes_using(flwr_home)
    assert left == [], f"a SuperLink, SuperExec or Ray process was left running: {described(left)}"
    return code, log.read_text(errors="replace")


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_fedentopt_selects_with_a_buffer_and_keeps_theta_only_messages(tmp_path: Path) -> None:
    overrides = {
        "method": "fedft-eds",
        "model": "lenet5",
        "pretrain": "none",
        "client-selection": "fedentopt",
        "fraction-train": 0.5,
        "fedentopt-buffer": 0.25,
        "label-dp-epsilon": 0.5,
        "partitioner": "pathological",
        "classes-per-client": 2,
        "num-server-rounds": 2,
        "local-epochs": 1,
        "run-name": "entopt",
        "lr-decay": 0.5,
    }
    code, log = simulate(tmp_path, overrides, num_supernodes=4)
    assert code == 0, log[-3000:]
    run = tmp_path / "results" / "entopt"
    counts = json.loads((run / "label_counts.json").read_text())
    assert sorted(counts) == ["0", "1", "2", "3"]
    assert all(len(v) == 10 and min(v) >= 0 for v in counts.values())
    # Laplace noise reached the server: each client holds 2 labels, but rounded noise makes some zero counts positive
    assert all(v == round(v) for vec in counts.values() for v in vec)
    assert any(sum(v > 0 for v in vec) > 2 for vec in counts.values())
    first, second = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    assert len(first["clients"]) == len(second["clients"]) == 2
    assert first["clients"][-1] not in second["clients"]  # Q = 1: the last selected client sits out a round
    assert second["learning_rate"] == pytest.approx(0.5 * first["learning_rate"])
    for record in (first, second):
        assert record["cohort_labels_covered"] >= 2 and 0 < record["cohort_label_entropy"] <= math.log2(10)
    _, trained = split_state(LeNet5(1, 10).state_dict(), LeNet5(1, 10).upper_state_keys("mid"))
    assert first["bytes_up"] == second["bytes_up"] == 2 * ArrayRecord(trained).count_bytes()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["mean_cohort_label_entropy"] == pytest.approx(
        (first["cohort_label_entropy"] + second["cohort_label_entropy"]) / 2
    )


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_invalid_config_stops_before_training_naming_the_key(tmp_path: Path) -> None:
    code, log = simulate(tmp_path, {"fraction-train": 1.5, "run-name": "bad"}, num_supernodes=2)
    assert code != 0
    assert "'fraction-train' = 1.5 is invalid: it must be in (0, 1]" in log
    assert "round 1: accuracy" not in log
    assert "Traceback" not in log  # the reason in one line, not under twenty lines of stack
    assert not (tmp_path / "results" / "bad" / "rounds.jsonl").exists()


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_a_run_that_trains_nothing_fails_with_its_first_client_error(tmp_path: Path) -> None:
    overrides = {
        "model": "lenet5",
        "pretrain": "none",
        "num-server-rounds": 1,
        "local-epochs": 1,
        "run-name": "nothing",
        "fail-partitions": "0:raise,1:raise",
    }
    code, log = simulate(tmp_path, overrides, num_supernodes=2)
    assert code != 0
    summary = json.loads((tmp_path / "results" / "nothing" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds_aggregated"] == 0
    assert "nothing was trained; first problem: round 1: client 0 failed: InjectedFault" in log
    assert "run status on the SuperLink: ['finished:failed']" in log  # how the launcher knew: flwr run exits 0
    assert "Traceback" not in log[log.index("run failed") :]  # the server's end: its reason, no stack


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_failing_hanging_and_garbage_clients_do_not_stop_or_poison_the_run(tmp_path: Path) -> None:
    overrides = {
        "method": "fedft-eds",
        "model": "lenet5",
        "pretrain": "none",
        "num-server-rounds": 2,
        "local-epochs": 1,
        "run-name": "faults",
        "partitioner": "iid",
        "fail-partitions": "1:raise,2:garbage,3:hang",
        "round-timeout": 10.0,
    }
    code, log = simulate(tmp_path, overrides, num_supernodes=4)
    assert code == 0, log[-3000:]
    first, second = [
        json.loads(line) for line in (tmp_path / "results" / "faults" / "rounds.jsonl").read_text().splitlines()
    ]
    for record in (first, second):
        assert record["aggregated"] is True and [s["partition_id"] for s in record["client_stats"]] == [0]
        assert record["failed"] == [
            {"partition_id": 1, "reason": "InjectedFault: fail-partitions: this client is set to raise"}
        ]
        (rejected,) = record["rejected"]
        assert rejected["partition_id"] == 2 and rejected["reason"].endswith("holds NaN or infinite values")
        assert record["timed_out"] == [3]
    # Partitions 0 and 2 answered, so they keep φ; 1 (raised) and 3 (too late) are sent φ again.
    theta_bytes = first["bytes_up"] // 2
    phi_bytes = (first["bytes_down"] - 4 * theta_bytes) // 4
    assert second["bytes_down"] == 4 * theta_bytes + 2 * phi_bytes
    model = torch.load(tmp_path / "results" / "faults" / "model.pt")
    assert all(torch.isfinite(v).all() for v in model.values() if v.is_floating_point())
    assert "round 2: client 1 failed: InjectedFault" in log


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_a_run_whose_client_actor_dies_stops_as_failed_instead_of_going_on_without_it(tmp_path: Path) -> None:
    """Flower's engine keeps a dead actor in its pool, failing every later message it gets; the ServerApp stops
    the run at the first reply that says an actor died (``simulation/dead_actors.py``)."""
    overrides = {
        "model": "lenet5",
        "pretrain": "none",
        "num-server-rounds": 3,
        "local-epochs": 1,
        "run-name": "died",
        "fail-partitions": "1:die",
    }
    code, log = simulate(tmp_path, overrides, num_supernodes=2)
    assert code != 0
    summary = json.loads((tmp_path / "results" / "died" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds"] == 0
    assert summary["failure"].startswith("DeadActorError: a simulated ClientApp's process died")
    assert "run status on the SuperLink: ['finished:failed']" in log
    assert "round 2" not in log
