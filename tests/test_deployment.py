"""A real deployment on loopback: SuperLink with TLS, SuperNode authentication and the loopback gate, an outsider
refused, a registered SuperNode on its own exported data joining and training a FedAvg round submitted with ``flwr``
while an unregistered key and a node without the CA certificate cannot join (the scripts in ``deployment/`` start and
stop everything); and, opt-in (``FEDFT_SLOW_E2E=1``, docs/development.md): a 2-round FedFT-EDS run with FedEntOpt
selection and the pretraining round over three such nodes, one more refused for its missing data (11 ClientApp
processes, each importing torch: 77 s of the default suite's 238 s on the 2-core machine when it was in it), and
``flwr stop`` of a deployed run.

The SuperLink listens on 0.0.0.0. Its "public" address in this test is 127.0.0.2, which the gate treats like
any non-loopback interface: SuperNodes connect there (Fleet API); an outsider holding the CA certificate tries
the Control and Runtime APIs there and is refused. The operator uses 127.0.0.1 (linux: all of 127/8 is
loopback, so 127.0.0.2 needs no setup)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import torch

from data.node_data import export_partitions
from deployment.credentials import write_credentials
from deployment.loopback import BIN, MARKER, PROJECT, SCRIPTS, deployment_env, wait_for
from run_config import federated_split
from simulation.app_files import stage_app
from simulation.local_run import free_port, processes_marked
from tests.conftest import make_config

REFUSED = "answers its Control and Runtime APIs only on 127.0.0.1"


def read_text(path: Path) -> str:
    """The text of ``path``; empty while it does not exist."""
    return path.read_text() if path.is_file() else ""


def read_lines(path: Path) -> list[str]:
    """The lines of ``path``; none while it does not exist."""
    return read_text(path).splitlines()


def assert_refused_by_gate(result: subprocess.CompletedProcess) -> None:
    """A ``flwr ... --format json`` call that the SuperLink's loopback gate refused (flwr exits 0 with JSON)."""
    reply = json.loads(result.stdout)
    assert reply["success"] is False and REFUSED in reply["error-message"], result.stdout


class Deployment:
    """A SuperLink (TLS, node authentication, the loopback gate) on loopback, started by ``deployment/`` scripts,
    with the app staged once and Fashion-MNIST-mini exported for 4 SuperNodes; ``flwr`` runs Flower's CLI against
    it (``deploy`` on 127.0.0.1, ``outside`` on the public address 127.0.0.2)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path, self.keys, self.homes = tmp_path, tmp_path / "keys", tmp_path / "nodes"
        write_credentials(self.keys, ["127.0.0.1", "127.0.0.2", "localhost"], num_supernodes=6)
        run_config = {"dataset": "fashion-mnist-mini", "partitioner": "dirichlet", "dirichlet-alpha": 0.5}
        split = federated_split(make_config(**{k.replace("-", "_"): v for k, v in run_config.items()}))
        export_partitions(split, 4, tmp_path / "data")
        # What `flwr run .` packs, staged once (Flower walks the whole folder, its virtual environment included, at
        # every `flwr run`: about 10 s each on a loaded machine; `python -m simulation` stages the same way).
        self.app = stage_app(PROJECT, tmp_path / "app")
        self.marker = uuid.uuid4().hex
        flwr_home = tmp_path / "flwr-home"
        flwr_home.mkdir()
        self.env = deployment_env(flwr_home, self.marker, "--max-retries 3 --max-wait-time 20")
        self.port = free_port()
        self.public = f"127.0.0.2:{self.port}"  # what SuperNodes and outsiders reach
        ca = self.keys / "ca.crt"
        (flwr_home / "config.toml").write_text(
            f'[superlink]\ndefault = "deploy"\n\n'
            f'[superlink.deploy]\naddress = "127.0.0.1:{self.port}"\nroot-certificates = "{ca}"\n\n'
            f'[superlink.outside]\naddress = "{self.public}"\nroot-certificates = "{ca}"\n'
        )
        self.states = [tmp_path / "superlink"]

    def sh(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, check=False, env=self.env, cwd=PROJECT, capture_output=True, text=True, timeout=timeout
        )

    def flwr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.sh(str(BIN / "flwr"), *args, timeout=timeout)

    def start_superlink(self) -> None:
        started = self.sh(
            str(SCRIPTS / "start-superlink.sh"), str(self.states[0]), str(self.keys), "0.0.0.0", str(self.port)
        )
        assert started.returncode == 0, started.stderr
        wait_for(
            lambda: '"success": true' in self.flwr("supernode", "list", "deploy", "--format", "json").stdout,
            60,
            "the SuperLink's control API",
        )

    def register(self, count: int) -> None:
        """Register the public keys of SuperNodes 0 to ``count`` − 1, as the operator does."""
        for i in range(count):
            registered = self.flwr("supernode", "register", str(self.keys / f"supernode-{i}.pub"), "deploy")
            assert registered.returncode == 0, registered.stdout + registered.stderr

    def supernode(self, name: str, key: str, node_config: str, ca: Path | None = None) -> Path:
        """Start a SuperNode with ``key``'s private key; its log."""
        state = self.homes / name
        self.states.append(state)
        result = self.sh(
            str(SCRIPTS / "start-supernode.sh"),
            str(state),
            self.public,
            str(ca or self.keys / "ca.crt"),
            str(self.keys / key),
            str(free_port()),
            node_config,
        )
        assert result.returncode == 0, result.stderr
        return state / "supernode.log"

    def data_node(self, i: int) -> Path:
        """SuperNode ``i`` on its exported partition."""
        data = self.tmp_path / "data" / f"node-{i}"
        return self.supernode(f"node-{i}", f"supernode-{i}", f'partition-id={i} num-partitions=4 data-path="{data}"')

    def submit(self, overrides: str) -> subprocess.CompletedProcess:
        return self.flwr("run", str(self.app), "deploy", "--format", "json", "--run-config", overrides)


@contextmanager
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    """A ``Deployment``, stopped by ``deployment/stop.sh`` afterwards: nothing it started may outlive the script."""
    running = Deployment(tmp_path)
    try:
        yield running
    finally:
        stop = running.sh(str(SCRIPTS / "stop.sh"), *map(str, running.states))
        leftovers = processes_marked(running.marker, MARKER)
        for pid in leftovers:
            os.kill(pid, 9)
    assert stop.returncode == 0
    assert leftovers == [], "a SuperLink, SuperNode or app process outlived stop.sh"


def refuse_the_outsider(d: Deployment) -> None:
    """An outsider with the CA certificate, on the public address: cannot register its key (with Flower's CLI, as an
    operator would), start, list or stop runs, or take the ServerApp's task from the Runtime API (the gate answers
    before Flower, which would answer 415 to these empty requests; each CLI call costs seconds of imports, and `flwr
    run` seconds more to pack the app)."""
    outsider_key = str(d.keys / "supernode-4.pub")
    assert_refused_by_gate(d.flwr("supernode", "register", outsider_key, "outside", "--format", "json"))
    trust_ca = ssl.create_default_context(cafile=str(d.keys / "ca.crt"))
    paths = ("/v1/control/start-run", "/v1/control/list-runs", "/v1/control/stop-run", "/v1/runtime/acquire-task")
    for path in paths:
        reply = httpx.post(f"https://{d.public}{path}", verify=trust_ca, timeout=30)
        assert reply.status_code == 403 and REFUSED in reply.json()["detail"], path


def start_the_refused_nodes(d: Deployment) -> tuple[Path, Path]:
    """A SuperNode whose key was never registered, and one that trusts the system's CA bundle instead of ours (it
    cannot verify the SuperLink's certificate); their logs."""
    intruder_log = d.supernode("intruder", "supernode-4", "partition-id=0 num-partitions=4")
    no_ca_log = d.supernode(
        "no-ca", "supernode-5", "partition-id=1 num-partitions=4", ca=Path("/etc/ssl/certs/ca-certificates.crt")
    )
    return intruder_log, no_ca_log


def assert_the_refused_nodes_never_joined(d: Deployment, intruder_log: Path, no_ca_log: Path) -> None:
    """Registered nodes log the id the SuperLink gave them; the unregistered key and the node that cannot verify the
    SuperLink's certificate never get one (everything else about them is the same). The node without our CA fails
    the TLS handshake: Flower either retries ("Connection attempt failed") or exits at once with code 305 naming the
    certificate, depending on when the handshake fails."""
    for refused, signs in (
        (intruder_log, ("Connection attempt failed",)),
        (no_ca_log, ("Connection attempt failed", "CERTIFICATE_VERIFY_FAILED")),
    ):

        def shows_a_sign(log: Path = refused, signs: tuple[str, ...] = signs) -> bool:
            return any(sign in read_text(log) for sign in signs)

        wait_for(shows_a_sign, 60, f"{refused.parent.name} refused")
        text = refused.read_text()
        assert "SuperNode ID:" not in text and "Receiving:" not in text, text[-2000:]
    assert "SuperNode ID:" in (d.homes / "node-0" / "supernode.log").read_text()


def finished_run(d: Deployment, run_id: str) -> str:
    """Stream the run's log until it ends, check it is the one run and completed; the log."""
    streamed = d.flwr("log", run_id, "deploy", "--stream", timeout=400)
    log = streamed.stdout + streamed.stderr
    (d.tmp_path / "flwr-run.log").write_text(log)
    listing = json.loads(d.flwr("ls", "deploy", "--format", "json").stdout)
    assert [(r["run-id"], r["status"]) for r in listing["runs"]] == [(run_id, "finished:completed")], log[-4000:]
    return log


@pytest.mark.e2e
def test_tls_authenticated_deployment_admits_registered_nodes_and_trains_a_round(tmp_path: Path) -> None:
    with deployment(tmp_path) as d:
        d.start_superlink()
        refuse_the_outsider(d)
        d.register(1)
        node_log = d.data_node(0)
        intruder_log, no_ca_log = start_the_refused_nodes(d)
        # Its node config says 4 partitions; the run waits for none of the 3 that never come (node-wait-seconds=0).
        wait_for(lambda: "SuperNode ID:" in read_text(node_log), 60, "node 0 to join")
        overrides = (
            'method="fedavg" model="lenet5" pretrain="none" num-server-rounds=1 local-epochs=1 fraction-train=1.0 '
            f'min-train-nodes=1 node-wait-seconds=0.0 client-threads=1 run-name="deployed" '
            f'results-dir="{tmp_path / "results"}" feature-cache-dir="{tmp_path / "features"}" dirichlet-alpha=0.5'
        )
        finished_run(d, json.loads(d.submit(overrides).stdout)["run-id"])
        nodes = json.loads(d.flwr("supernode", "list", "deploy", "--format", "json").stdout)["nodes"]
        assert len(nodes) == 1  # supernode-4's registration from outside did not happen
        [record] = map(json.loads, read_lines(tmp_path / "results" / "deployed" / "rounds.jsonl"))
        assert record["round"] == 1 and record["clients"] == [0] and record["failed"] == []
        exported = json.loads((tmp_path / "data" / "node-0" / "partition.json").read_text())
        assert [s["num_local"] for s in record["client_stats"]] == [exported["num-samples"]]  # its own folder
        assert_the_refused_nodes_never_joined(d, intruder_log, no_ca_log)


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_tls_authenticated_deployment_runs_fedft_eds_with_fedentopt(tmp_path: Path) -> None:
    with deployment(tmp_path) as d:
        d.start_superlink()
        refuse_the_outsider(d)
        d.register(4)  # node 4 and node 5 stay unregistered
        for i in range(3):
            d.data_node(i)
        # Registered, but its data-path does not exist: fails on its first data access, the run goes on.
        d.supernode("node-3", "supernode-3", f'partition-id=3 num-partitions=4 data-path="{tmp_path / "missing"}"')
        intruder_log, no_ca_log = start_the_refused_nodes(d)

        overrides = (
            'method="fedft-eds" model="lenet5" pretrain-epochs=2 pretrain-samples=600 num-server-rounds=2 '
            'local-epochs=1 client-selection="fedentopt" fraction-train=0.5 fedentopt-buffer=0.25 '
            "pretrain-round-max-epochs=2 node-wait-seconds=20.0 client-threads=1 "
            f'run-name="deployed" results-dir="{tmp_path / "results"}" pretrain-cache-dir="{tmp_path / "pretrained"}" '
            f'feature-cache-dir="{tmp_path / "features"}" dirichlet-alpha=0.5'
        )
        # Pretraining and 2 rounds: minutes on a loaded machine.
        log = finished_run(d, json.loads(d.submit(overrides).stdout)["run-id"])
        nodes = json.loads(d.flwr("supernode", "list", "deploy", "--format", "json").stdout)["nodes"]
        assert len(nodes) == 4  # supernode-4's registration from outside did not happen
        assert "proceeding with" not in log  # node 3 is connected and refused: no round waited for it
        results = tmp_path / "results" / "deployed"
        phase, *rounds = [json.loads(line) for line in (results / "rounds.jsonl").read_text().splitlines()]
        # The pretraining round (thesis §6.4.1 step 2) over the deployment: every node with data, at most 2 epochs each.
        assert (phase["round"], phase["phase"]) == (0, "pretraining-round")
        assert sorted(phase["clients"]) == [0, 1, 2] and set(phase["epochs"].values()) <= {1, 2}
        assert [r["round"] for r in rounds] == [1, 2]
        for record in rounds:
            assert len(record["clients"]) == 2 and set(record["clients"]) <= {0, 1, 2}  # node 3 has no usable data
            assert record["failed"] == [] and record["rejected"] == [] and record["timed_out"] == []
            for stats in record["client_stats"]:
                node_folder = tmp_path / "data" / f"node-{stats['partition_id']}"
                exported = json.loads((node_folder / "partition.json").read_text())
                assert stats["num_local"] == exported["num-samples"]  # trained on its own exported folder
        assert sorted(json.loads((results / "label_counts.json").read_text())) == ["0", "1", "2"]
        # Node 3 fails its identify message (its data-path is missing): refused, named in the summary, never asked.
        summary = json.loads((results / "summary.json").read_text())
        assert summary["label_counts_refused"] == {}
        [why] = summary["nodes_refused"].values()
        assert why.startswith("error reply: NodeDataError: node config 'data-path'") and "is not a folder" in why
        assert (results / "model.pt").stat().st_size > 0

        assert_the_refused_nodes_never_joined(d, intruder_log, no_ca_log)


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_flwr_stop_of_a_deployed_run_is_recorded(tmp_path: Path) -> None:
    """``flwr stop`` during a deployed run: the ServerApp's process records the stop, and summary.json, rounds.jsonl
    and the checkpoint hold the same rounds, with no final model."""
    with deployment(tmp_path) as d:
        d.start_superlink()
        d.register(4)
        for i in range(4):
            d.data_node(i)
        long_run = (
            'method="fedavg" model="lenet5" pretrain="none" num-server-rounds=500 local-epochs=1 client-threads=1 '
            f'node-wait-seconds=60.0 run-name="stopped" results-dir="{tmp_path / "results"}" '
            f'feature-cache-dir="{tmp_path / "features"}" dirichlet-alpha=0.5'
        )
        run_id = json.loads(d.submit(long_run).stdout)["run-id"]
        stopped = tmp_path / "results" / "stopped"
        wait_for(lambda: len(read_lines(stopped / "rounds.jsonl")) >= 1, 300, "a round of the run to stop")
        assert d.flwr("stop", run_id, "deploy").returncode == 0
        wait_for(lambda: (stopped / "summary.json").is_file(), 60, "the stopped run's summary")
        listing = json.loads(d.flwr("ls", "deploy", "--format", "json").stdout)
        assert {r["run-id"]: r["status"] for r in listing["runs"]}[run_id] == "finished:stopped"
        summary = json.loads((stopped / "summary.json").read_text())
        assert summary["status"] == "interrupted" and 1 <= summary["rounds"] < 500
        assert len(read_lines(stopped / "rounds.jsonl")) == summary["rounds"]
        assert torch.load(stopped / "checkpoint.pt", weights_only=False)["server_round"] == summary["rounds"]
        assert not (stopped / "model.pt").exists()
