"""The load benchmark's bookkeeping (``deployment/federation_load.py``): what a run's rounds add up to, the run
settings per N, the recorded table and docs/deployment.md's copy of it. The benchmark itself starts dozens of
processes for an hour; it is run by hand (docs/deployment.md, "A federation under load")."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization

from deployment import federation_load as load
from deployment.credentials import write_credentials
from deployment.loopback import LoopbackFederation, online
from methods.registry import config_with_overrides


def record(round_number: int, clients: list[int], accepted: int, **lists: list[int]) -> dict:
    return {
        "round": round_number,
        "clients": clients,
        "client_stats": [{"partition_id": c} for c in clients[:accepted]],
        "aggregated": accepted > 0,
        "wall_seconds": float(round_number),
        "accuracy": 0.1 * round_number,
        **{key: lists.get(key, []) for key in ("failed", "rejected", "timed_out")},
    }


def test_round_figures_count_lost_updates_and_leave_out_the_pretraining_round() -> None:
    records = [
        {"round": 0, "clients": [0, 1, 2], "failed": [2], "wall_seconds": 99.0},  # the pretraining round
        record(1, [0, 1], 2),
        record(2, [1, 2], 0, failed=[1], timed_out=[2]),
        record(3, [0, 2], 1, rejected=[2]),
    ]
    figures = load.round_figures(records)
    assert figures["rounds_recorded"] == 3
    assert figures["rounds_aggregated"] == 2
    assert figures["updates_asked"] == 6
    assert figures["updates_lost"] == 3
    assert figures["round_seconds_median"] == 2.0 and figures["round_seconds_max"] == 3.0
    assert figures["final_accuracy"] == pytest.approx(0.3)
    assert figures["rounds_recorded_twice"] == 0


def test_the_pretraining_round_is_reported_apart() -> None:
    phase = {"round": 0, "clients": [0, 1, 2], "client_stats": [{}, {}], "timed_out": [2], "wall_seconds": 99.04}
    assert load.pretraining_round_figures([phase, record(1, [0], 1)]) == {
        "pretraining_round": {"asked": 3, "aggregated": 2, "lost": 1, "wall_seconds": 99.0, "cached": False}
    }
    assert load.pretraining_round_figures([record(1, [0], 1)]) == {}


def test_a_round_recorded_twice_is_counted() -> None:
    """A resumed run that repeated a finished round would show here (the restart's check)."""
    assert load.round_figures([record(1, [0], 1), record(2, [0], 1), record(2, [0], 1)])["rounds_recorded_twice"] == 1


@pytest.mark.parametrize(("nodes", "per_round", "fraction"), [(5, 10, 1.0), (25, 10, 0.4), (50, 10, 0.2), (7, 0, 1.0)])
def test_the_cohort_is_per_round_nodes_or_all(tmp_path: Path, nodes: int, per_round: int, fraction: float) -> None:
    text = load.settings("fedft-eds", nodes, 20, per_round, tmp_path, "pretrain-round=false")
    config = config_with_overrides(text)  # every key is a known setting with a valid value
    assert config.fraction_train == pytest.approx(fraction)
    assert config.num_server_rounds == 20 and config.method == "fedft-eds" and config.model == "lenet5"
    assert config.pretrain_round is False


def test_read_status_waits_for_a_summary_written_after_the_resubmission(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    assert load.read_status(tmp_path) is None
    summary.write_text(json.dumps({"status": "interrupted"}))
    before = time.time() + 60
    assert load.read_status(tmp_path) == "interrupted"
    assert load.read_status(tmp_path, since=before) is None
    os.utime(summary, (before + 1, before + 1))
    assert load.read_status(tmp_path, since=before) == "interrupted"


def run(name: str, lost: int, **extra: object) -> dict:
    return {
        "run": name, "status": "completed", "rounds_aggregated": 20, "updates_lost": lost, "updates_asked": 200,
        "round_seconds_median": 12.34, "round_seconds_max": 20.0, "superlink_cpu_seconds": 30.4,
        "superlink_peak_rss_mib": 250.2, "serverapp_peak_rss_mib": 700.0, "node_peak_rss_mib_median": 640.4,
        "node_peak_rss_mib_max": 660.6, "total_peak_pss_gib": 3.456, "final_accuracy": 0.8412, **extra,
    }  # fmt: skip


RECORDED = {
    "cells": [
        {
            "nodes": 25,
            "rounds": 20,
            "runs": [
                run(
                    "fedavg",
                    0,
                    pretraining_round={
                        "asked": 25,
                        "aggregated": 23,
                        "lost": 2,
                        "wall_seconds": 233.4,
                        "cached": False,
                    },
                ),
                run(
                    "fedavg-restart",
                    1,
                    killed_after_rounds=10,
                    nodes_offline_before_the_kill=["7"],
                    rounds_recorded_twice=0,
                    pretraining_round={"asked": 25, "aggregated": 23, "lost": 2, "wall_seconds": 233.4, "cached": True},
                ),
            ],
        },  # fmt: skip
        {
            "nodes": 25,
            "rounds": 20,
            "settings": "pretrain-round=false",
            "runs": [
                run("fedavg", 0),
                run(
                    "fedft-eds",
                    0,
                    status="interrupted",
                    flower_status="finished:failed",
                    flower_status_details="No heartbeat received from the task",
                ),
            ],
        },
        {"nodes": 50, "rounds": 20, "runs": [], "error": "Traceback\nRuntimeError: start-supernode.sh 31 failed"},
    ]
}


def test_the_table_has_a_row_per_run_and_says_where_a_size_stopped() -> None:
    rows = load.table(RECORDED).splitlines()
    assert rows[2] == (
        "| 25 | fedavg | completed | 23 / 25 (233) | 20 of 20 | 0 / 200 | 12.3, 20.0 | 30 | 250 | 700 | 640 / 661 "
        "| 3.46 | 84.1% |"
    )
    assert rows[3].startswith(
        "| 25 | fedavg-restart (SuperLink killed after round 10, resumed; 1 node(s) already offline before the kill; "
        "0 round(s) recorded twice) "
        "| completed | from the cache | 20 of 20 "
        "| 1 / 200 |"
    )
    assert rows[4].startswith("| 25 | fedavg with `pretrain-round=false` | completed | – | 20 of 20 |")
    assert rows[5].startswith(
        "| 25 | fedft-eds with `pretrain-round=false` "
        '| interrupted (Flower: finished:failed, "No heartbeat received from the task") | – |'
    )
    assert rows[6] == "| 50 | stopped: RuntimeError: start-supernode.sh 31 failed |"


def test_docs_check_fails_on_a_stale_page_and_writing_fixes_it(tmp_path: Path) -> None:
    results, page = tmp_path / "load.json", tmp_path / "deployment.md"
    results.write_text(json.dumps(RECORDED))
    page.write_text(f"# Deployment\n\n{load.BLOCK_START}\n\n| old |\n\n{load.BLOCK_END}\n\nAfter.\n")
    assert load.docs(check=True, results=results, page_path=page) == 1
    assert load.docs(check=False, results=results, page_path=page) == 0
    assert load.docs(check=True, results=results, page_path=page) == 0
    text = page.read_text()
    assert load.table(RECORDED) in text and text.endswith("After.\n") and "| old |" not in text


def test_a_page_without_the_block_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="federation-load:start"):
        load.render("# Deployment\n", RECORDED)


def test_docs_deployment_md_shows_the_recorded_table() -> None:
    """docs/deployment.md's table is the recorded file's, regenerated (python -m deployment.federation_load docs)."""
    assert load.docs(check=True) == 0


def test_an_outsider_is_found_by_its_key_in_the_superlinks_refusal(tmp_path: Path) -> None:
    """The SuperLink logs a refused activation with the key's PEM as Python prints bytes (one line, ``\\n``
    escaped); the outsider's own key is found there, another key is not. The log lines are those of a real loopback
    federation under Flower 1.41 (28 Nov 2026): a change of Flower's wording shows as a recorded outsider that was
    not refused, which the table prints."""
    keys = tmp_path / "keys"
    write_credentials(keys, ["localhost"], num_supernodes=3)
    pem = serialization.load_ssh_public_key((keys / "supernode-2.pub").read_bytes()).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    link = tmp_path / "superlink"
    link.mkdir()
    (link / "superlink.log").write_text(
        "INFO: [Fleet.ActivateNode] Activated node_id=1\n"
        f"ERROR: [/v1/fleet/activate-node][ApiError:2004] Attempted to register SuperNode with public key: {pem!r}, "
        "exception: No SuperNode found with the given public key.\n"
    )
    logs = {0: "ERROR: Exit Code: 305\nFailed to initialize the connection", 1: "INFO: SuperNode ID: 7\nReceiving: x"}
    federation = SimpleNamespace(
        link_state=link, keys=keys, num_nodes=1, outsiders=2, outsider_log=lambda j: logs[j]
    )  # outsider 0 holds supernode-1 (not in the log), outsider 1 supernode-2
    first, second = load.outsider_figures(federation)  # type: ignore[arg-type]
    assert first == {
        "refused_in_superlink_log": False, "exit_code_305": True, "got_a_node_id": False, "received_a_message": False
    }  # fmt: skip
    assert second == {
        "refused_in_superlink_log": True, "exit_code_305": False, "got_a_node_id": True, "received_a_message": True
    }  # fmt: skip


def test_the_table_counts_what_became_of_the_outsiders() -> None:
    outsider = {"refused_in_superlink_log": True, "exit_code_305": True, "got_a_node_id": False,
                "received_a_message": False}  # fmt: skip
    cell = {"nodes": 5, "rounds": 20, "runs": [run("fedavg", 0)], "outsiders": [outsider], "nodes_listed": 5}
    assert load.table({"cells": [cell]}).splitlines()[-1] == (
        "SuperNodes with an unregistered key, started during the first run: N = 5: 1 of 1 refused at activation "
        "with its key named in the SuperLink's log, 1 of 1 ended with Flower's exit code 305, 0 of 1 got a node id, "
        "0 of 1 received a message; 5 nodes listed."
    )


class ListedRun:
    """A federation whose ``flwr ls`` lists run ``run_id`` with ``status`` (and, when asked, writes ``summary`` as
    the ServerApp would just then), whose results folder is ``folder`` and which runs no ServerApp process."""

    marker = "no process carries this marker"

    def __init__(self, folder: Path, run_id: str, status: str, details: str = "", summary: str | None = None) -> None:
        self.folder, self.run_id, self.status, self.details, self.summary = folder, run_id, status, details, summary
        self.asked = 0

    def results(self, run_name: str) -> Path:
        return self.folder / run_name

    def run_record(self, run_id: str) -> dict[str, object]:
        assert run_id == self.run_id
        self.asked += 1
        if self.summary is not None:
            write_summary(self.folder / "fedavg", self.summary)
        return {"run-id": run_id, "status": self.status, "status-details": self.details}


def write_summary(folder: Path, status: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"status": status}))


def test_a_run_flower_finished_without_a_summary_ends_the_wait_with_flower_s_reason(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(load, "FLOWER_STATUS_EVERY", 0.0)
    died = ListedRun(tmp_path, "7", "finished:failed", "ServerApp failed with exception: Failed to push object")
    status = load.wait_until_ended(died, "fedavg", "7", timeout=30)  # type: ignore[arg-type]
    assert status == "finished:failed, no summary: ServerApp failed with exception: Failed to push object"


def test_the_summary_s_status_wins_over_flower_s(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(load, "FLOWER_STATUS_EVERY", 0.0)
    written = ListedRun(tmp_path, "7", "finished:failed")
    write_summary(tmp_path / "fedavg", "completed")
    assert load.wait_until_ended(written, "fedavg", "7", 30) == "completed"  # type: ignore[arg-type]
    assert written.asked == 0  # a summary ends the wait without asking Flower
    (tmp_path / "fedavg" / "summary.json").unlink()
    # Flower lists the run finished just as its summary is written: the summary is read again, and wins.
    racing = ListedRun(tmp_path, "8", "finished:completed", summary="interrupted")
    assert load.wait_until_ended(racing, "fedavg", "8", 30) == "interrupted"  # type: ignore[arg-type]


def test_flower_is_asked_at_most_every_flower_status_every_seconds(tmp_path: Path, monkeypatch) -> None:
    running = ListedRun(tmp_path, "8", "running")
    monkeypatch.setattr(load, "FLOWER_STATUS_EVERY", 60.0)
    with pytest.raises(AssertionError, match="fedft-eds to end"):
        load.wait_until_ended(running, "fedft-eds", "8", timeout=0.5)  # type: ignore[arg-type]
    assert running.asked == 0
    monkeypatch.setattr(load, "FLOWER_STATUS_EVERY", 0.0)
    with pytest.raises(AssertionError, match="fedft-eds to end"):
        load.wait_until_ended(running, "fedft-eds", "8", timeout=0.5)  # type: ignore[arg-type]
    assert running.asked == 2  # at each poll: the first, and the last at the deadline


def listing(*replies: dict[str, str] | None) -> LoopbackFederation:
    """A federation whose node listings are ``replies`` in turn (None: the SuperLink gave none)."""
    federation = object.__new__(LoopbackFederation)
    queue = list(replies)

    def node_status() -> dict[str, str]:
        reply = queue.pop(0)
        if reply is None:
            raise RuntimeError("flwr supernode list gave no listing")
        return reply

    federation.node_status = node_status  # type: ignore[method-assign]
    return federation


def test_a_missing_listing_is_asked_again_never_read_as_no_node_online() -> None:
    assert listing(None, {"1": "online", "2": "offline"}).listed_status(timeout=10) == {"1": "online", "2": "offline"}
    with pytest.raises(RuntimeError, match="no listing"):
        listing(None, None).listed_status(timeout=0)


def test_the_restart_waits_for_the_nodes_online_before_it_only() -> None:
    before = online({"1": "online", "2": "online", "3": "offline"})
    assert before == {"1", "2"}
    listing(None, {"1": "online", "2": "offline"}, {"1": "online", "2": "online", "3": "offline"}).wait_online(before)
    with pytest.raises(AssertionError, match="the 2 nodes online before"):
        listing(*[{"1": "online", "3": "online"}] * 10).wait_online(before, timeout=1)


def test_a_run_that_did_not_complete_keeps_flower_s_reason_and_its_log_tail(tmp_path: Path) -> None:
    stopped = ListedRun(tmp_path, "9", "finished:stopped", "stopped by the SuperLink")
    log = "\n".join(f"line {i}" for i in range(100))
    stopped.flwr = lambda *args: subprocess.CompletedProcess(args, 0, log, "")  # type: ignore[attr-defined]
    kept = load.why_not_completed(stopped, "9")  # type: ignore[arg-type]
    assert kept["flower_status"] == "finished:stopped"
    assert kept["flower_status_details"] == "stopped by the SuperLink"
    assert kept["serverapp_log_tail"] == [f"line {i}" for i in range(60, 100)]
