"""Faults in a loopback deployment with TLS and SuperNode authentication (the shape of ``test_deployment.py``):
a SuperNode killed with ``kill -9`` in the middle of a round and started again as systemd would, a node whose
connection is cut (a proxy stopped and started between it and the SuperLink) for longer than a round, and the
SuperLink stopped and started again, after which the run goes on from its checkpoint (``resume=true``).

Flower marks a node offline only after two missed heartbeats (2 x 30 s, fixed in flwr 1.41): until then the killed
node's restarts are refused (exit code 305) and the restart loop starts it again, as ``Restart=`` would. So the
test takes a minute or two however fast the rounds are; 4.5-6 minutes on a loaded 2-core machine. That is more
than CI's budget allows beside the suite, so it runs when ``FEDFT_FAULT_E2E=1`` is set (docs/development.md gives
the command and its last result)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from deployment.loopback import wait_for
from tests.deployment_faults import Deployment, read_rounds, trained

#: Generous for a loaded 2-core machine: a ClientApp process starts, imports torch and trains in this time.
ROUND_TIMEOUT = 60.0
SETTINGS = f"round-timeout={ROUND_TIMEOUT} client-threads=1"


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("FEDFT_FAULT_E2E") != "1", reason="opt-in (minutes): set FEDFT_FAULT_E2E=1")
def test_killed_and_cut_nodes_rejoin_and_the_run_resumes_after_a_superlink_restart(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, num_nodes=3, restart_seconds=2.0)
    leftovers: list[int] = []
    try:
        proxy = deployment.via_proxy(2)  # node 2 reaches the SuperLink through a proxy we can cut
        deployment.start_superlink()
        deployment.register_nodes()
        deployment.start_nodes()
        deployment.wait_all_online()
        run_id = deployment.submit("faults", f"num-server-rounds=50 node-wait-seconds=5.0 {SETTINGS}")
        results = deployment.results("faults")

        wait_for(lambda: read_rounds(results), 300, "round 1")
        assert trained(read_rounds(results)[0]) == [0, 1, 2]
        # Round 2 reaches nodes 1 and 2 (each node's second train message: the SuperLink may hand it out before a
        # count taken now, so the test would wait for round 3's); then node 1 dies (SuperNode and ClientApp) and node
        # 2's network goes.
        wait_for(
            lambda: all(deployment.node_log(i).count("Receiving: train") >= 2 for i in (1, 2)),
            120,
            "round 2's messages at nodes 1 and 2",
            every=0.05,  # a ClientApp starts, trains and replies within seconds: the kill and the cut come first
        )
        replies_sent = [deployment.node_log(i).count("Sending: train") - 1 for i in (1, 2)]  # round 2's, if any
        deployment.kill_node(1)
        proxy.stop()
        # Round 2 completes with node 0 alone (the others time out or fail); the run goes on.
        wait_for(lambda: len(read_rounds(results)) >= 2, ROUND_TIMEOUT + 120, "round 2")
        second = read_rounds(results)[1]
        assert trained(second) == [0], (second, f"round 2's replies sent by nodes 1 and 2 before: {replies_sent}")
        missing = set(second["timed_out"]) | set(second["failed"])
        assert {1, 2} <= missing, second
        # The cut lasts longer than a round: reopened once round 2 is over. Node 1 is restarted by the loop, and is
        # refused (305) while the SuperLink still holds its old session.
        proxy.start()
        back = wait_for(
            lambda: next((r for r in read_rounds(results)[2:] if {1, 2} <= set(trained(r))), None),
            300,
            "a round in which the killed node and the cut node train again",
        )
        assert deployment.starts[1] >= 2 and deployment.starts[2] == 1  # node 2 reconnected by itself

        # The SuperLink stops right after that round (its checkpoint is written) and starts again.
        starts = list(deployment.starts)
        deployment.stop_superlink()
        # The ServerApp notices its SuperLink is gone and records the run as interrupted, unless stop.sh had to kill
        # it first (10 s; a loaded machine): either way the checkpoint holds every finished round.
        if (results / "summary.json").is_file():
            assert json.loads((results / "summary.json").read_text())["status"] == "interrupted"
        checkpoint = torch.load(results / "checkpoint.pt", weights_only=False)["server_round"]
        assert checkpoint >= back["round"]
        deployment.start_superlink()
        # The SuperNodes kept running and reconnect; the interrupted run is not finished in superlink.db.
        deployment.wait_all_online()
        # Nodes 0 and 1 (direct connections) retried and reconnected by themselves. Node 2's proxy accepts and then
        # drops the connection: Flower takes that for a TLS handshake error and exits (code 0), so the restart loop
        # (systemd's Restart=always; on-failure would not restart it) starts it again.
        assert deployment.starts[:2] == starts[:2]
        assert deployment.run_status(run_id) != "finished:completed"
        # The resumed run waits for every node (the default 120 s would do; 60 s is plenty on loopback).
        resumed = deployment.submit(
            "faults", f"num-server-rounds={checkpoint + 1} resume=true {SETTINGS} node-wait-seconds=60.0"
        )
        wait_for(
            lambda: str(deployment.run_status(resumed)).startswith("finished"), ROUND_TIMEOUT + 240, "the resumed run"
        )
        assert deployment.run_status(resumed) == "finished:completed"
        summary = json.loads((results / "summary.json").read_text())
        rounds = read_rounds(results)
        assert summary["status"] == "completed" and summary["rounds"] == checkpoint + 1
        assert [r["round"] for r in rounds] == list(range(1, checkpoint + 2))
        assert set(rounds[-1]["clients"]) >= {0, 1} and trained(rounds[-1]), rounds[-1]
        assert (results / "model.pt").stat().st_size > 0
        print(f"rounds: {[(r['round'], trained(r), round(r['wall_seconds'], 1)) for r in rounds]}")
        print(f"starts per node: {deployment.starts}")
    finally:
        leftovers = deployment.close()
    assert leftovers == [], "a SuperLink, SuperNode or app process outlived stop.sh"
