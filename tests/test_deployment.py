"""A real deployment on loopback: SuperLink with TLS and SuperNode authentication, SuperNodes reading their
own exported data, a FedFT-EDS run with FedEntOpt selection submitted with ``flwr run`` (the scripts in
``deployment/`` start and stop everything)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from deployment.credentials import write_credentials
from run_config import federated_split
from data.node_data import export_partitions
from simulation.local_run import free_port, processes_marked
from tests.conftest import make_config

PROJECT = Path(__file__).resolve().parents[1]
SCRIPTS = PROJECT / "deployment"
BIN = Path(sys.executable).parent
MARKER = "FEDFT_DEPLOYMENT_TEST_ID"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.e2e
def test_tls_authenticated_deployment_runs_fedft_eds_with_fedentopt(tmp_path: Path) -> None:
    keys, homes = tmp_path / "keys", tmp_path / "nodes"
    write_credentials(keys, ["127.0.0.1", "localhost"], num_supernodes=6)
    run_config = {"dataset": "fashion-mnist-mini", "partitioner": "dirichlet", "dirichlet-alpha": 0.5}
    split = federated_split(make_config(**{k.replace("-", "_"): v for k, v in run_config.items()}))
    export_partitions(split, 4, tmp_path / "data")

    marker = uuid.uuid4().hex
    flwr_home = tmp_path / "flwr-home"
    flwr_home.mkdir()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", MARKER: marker, "FLWR_HOME": str(flwr_home),
           "FLWR_DISABLE_UPDATE_CHECK": "1", "SUPERNODE_EXTRA_ARGS": "--max-retries 3 --max-wait-time 20"}
    port = free_port()
    address = f"127.0.0.1:{port}"
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "deploy"\n\n[superlink.deploy]\naddress = "{address}"\n'
        f'root-certificates = "{keys / "ca.crt"}"\n'
    )
    link_state = tmp_path / "superlink"
    states = [link_state]

    def sh(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=env, cwd=PROJECT, capture_output=True, text=True, timeout=120, **kw)

    def supernode(name: str, key: str, node_config: str, ca: Path | None = None) -> Path:
        state = homes / name
        states.append(state)
        result = sh(str(SCRIPTS / "start-supernode.sh"), str(state), address, str(ca or keys / "ca.crt"),
                    str(keys / key), str(free_port()), node_config)
        assert result.returncode == 0, result.stderr
        return state / "supernode.log"

    try:
        assert sh(str(SCRIPTS / "start-superlink.sh"), str(link_state), str(keys), "127.0.0.1", str(port)).returncode == 0
        wait_for(lambda: '"success": true' in sh(str(BIN / "flwr"), "supernode", "list", "deploy", "--format", "json").stdout,
                 60, "the SuperLink's control API")
        for i in range(4):  # node 4 and node 5 stay unregistered
            registered = sh(str(BIN / "flwr"), "supernode", "register", str(keys / f"supernode-{i}.pub"), "deploy")
            assert registered.returncode == 0, registered.stdout + registered.stderr

        for i in range(3):
            supernode(f"node-{i}", f"supernode-{i}", f'partition-id={i} num-partitions=4 data-path="{tmp_path / "data" / f"node-{i}"}"')
        # Registered, but its data-path does not exist: fails on its first data access, the run goes on.
        supernode("node-3", "supernode-3", f'partition-id=3 num-partitions=4 data-path="{tmp_path / "missing"}"')
        intruder_log = supernode("intruder", "supernode-4", 'partition-id=0 num-partitions=4')
        # The CA bundle of the system instead of ours: the SuperLink's certificate cannot be verified.
        no_ca_log = supernode("no-ca", "supernode-5", 'partition-id=1 num-partitions=4', ca=Path("/etc/ssl/certs/ca-certificates.crt"))

        overrides = (
            'method="fedft-eds" model="lenet5" pretrain-epochs=2 num-server-rounds=2 local-epochs=1 '
            'client-selection="fedentopt" fraction-train=0.5 fedentopt-buffer=0.25 node-wait-seconds=20.0 '
            f'run-name="deployed" results-dir="{tmp_path / "results"}" pretrain-cache-dir="{tmp_path / "pretrained"}" '
            f'feature-cache-dir="{tmp_path / "features"}" dirichlet-alpha=0.5'
        )
        run = sh(str(BIN / "flwr"), "run", str(PROJECT), "deploy", "--stream", "--run-config", overrides)
        log = run.stdout + run.stderr
        (tmp_path / "flwr-run.log").write_text(log)
        listing = json.loads(sh(str(BIN / "flwr"), "ls", "deploy", "--format", "json").stdout)
        assert [r["status"] for r in listing["runs"]] == ["finished:completed"], log[-4000:]

        results = tmp_path / "results" / "deployed"
        rounds = [json.loads(line) for line in (results / "rounds.jsonl").read_text().splitlines()]
        assert [r["round"] for r in rounds] == [1, 2]
        for record in rounds:
            assert len(record["clients"]) == 2 and set(record["clients"]) <= {0, 1, 2}  # node 3 has no usable data
            assert record["failed"] == [] and record["rejected"] == [] and record["timed_out"] == []
            for stats in record["client_stats"]:
                exported = json.loads((tmp_path / "data" / f"node-{stats['partition_id']}" / "partition.json").read_text())
                assert stats["num_local"] == exported["num-samples"]  # trained on its own exported folder
        assert sorted(json.loads((results / "label_counts.json").read_text())) == ["0", "1", "2"]
        assert "partition 3 sent unusable label counts (error reply: NodeDataError: node config 'data-path'" in log
        assert (results / "model.pt").stat().st_size > 0

        # Registered nodes log the id the SuperLink gave them; the unregistered key and the node that cannot
        # verify the SuperLink's certificate never get one (everything else about them is the same).
        for refused in (intruder_log, no_ca_log):
            text = refused.read_text()
            assert "Connection attempt failed" in text and "SuperNode ID:" not in text
            assert "Receiving:" not in text
        assert "SuperNode ID:" in (homes / "node-0" / "supernode.log").read_text()
    finally:
        stop = sh(str(SCRIPTS / "stop.sh"), *map(str, states))
        leftovers = processes_marked(marker, MARKER)
        for pid in leftovers:
            os.kill(pid, 9)
    assert stop.returncode == 0
    assert leftovers == [], "a SuperLink, SuperNode or app process outlived stop.sh"
