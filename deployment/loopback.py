"""A federation on one machine, started with the deployment scripts exactly as a user starts one: a SuperLink with
TLS, SuperNode authentication and the loopback gate (``start-superlink.sh``), N SuperNodes each reading its own
exported partition (``start-supernode.sh``), runs submitted with ``flwr run``, everything stopped by PID
(``stop.sh``). The load benchmark (``python -m deployment.federation_load``) and the deployment fault tests build on
it; a real federation differs only in where the processes run.

The SuperLink listens on 0.0.0.0; SuperNodes reach it through 127.0.0.2, which the gate treats as a public address,
and the operator's ``flwr`` through 127.0.0.1 (Linux: all of 127/8 is loopback).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from data.node_data import export_partitions
from deployment.credentials import write_credentials
from methods.registry import config_with_overrides
from run_config import federated_split
from simulation.app_files import stage_app
from simulation.local_run import free_port, processes_marked

PROJECT = Path(__file__).resolve().parents[1]
SCRIPTS = PROJECT / "deployment"
BIN = Path(sys.executable).parent
#: The environment variable every process of one federation carries, so that all of them are found by it.
MARKER = "FEDFT_DEPLOYMENT_TEST_ID"
#: The split of the exported partitions unless told otherwise: the small Fashion-MNIST, IID.
SPLIT = "dataset='fashion-mnist-mini' partitioner='iid'"

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, every: float = 0.5) -> T:
    """The first true value of ``predicate()``, polled every ``every`` s and once more at the deadline; AssertionError
    after ``timeout`` s (a poll never sleeps past the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(min(every, left))


def deployment_env(flwr_home: Path, marker: str, supernode_args: str) -> dict[str, str]:
    """The environment of a loopback federation's scripts and CLI calls: this virtual environment's Flower first on
    PATH, ``marker`` under ``MARKER``, its own Flower home, no update check, ``supernode_args`` for the SuperNodes,
    and 150 s for a SuperLink to start serving (a loaded machine; start-superlink.sh's default is 60 s)."""
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        MARKER: marker,
        "FLWR_HOME": str(flwr_home),
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "SUPERNODE_EXTRA_ARGS": supernode_args,
        "PYTHON": sys.executable,
        "SUPERLINK_START_SECONDS": "150",
    }


def online(status: dict[str, str]) -> set[str]:
    """The nodes of a ``node_status`` listing that are online."""
    return {node for node, state in status.items() if state == "online"}


def pid_in(path: Path) -> int | None:
    """The PID a start script saved in ``path`` (None when there is none)."""
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text())
    return None


class LoopbackFederation:
    """A SuperLink and ``num_nodes`` SuperNodes under ``folder`` (keys/, data/, superlink/, nodes/node-<i>/,
    results/), started and stopped with the scripts in ``deployment/``. ``supernode_args`` go to every SuperNode
    (empty: retry the SuperLink for ever, as the systemd unit does). ``node_preexec[i]`` runs in SuperNode ``i``'s
    start script before it starts (e.g. entering a cgroup). ``outsiders`` more key pairs are made and never
    registered: ``start_outsider`` runs a SuperNode with one, as a device whose key the operator did not register."""

    def __init__(
        self, folder: Path, num_nodes: int, split: str = SPLIT, supernode_args: str = "", outsiders: int = 0
    ) -> None:
        self.folder, self.num_nodes, self.outsiders = folder, num_nodes, outsiders
        self.keys = folder / "keys"
        write_credentials(self.keys, ["127.0.0.1", "127.0.0.2", "localhost"], num_supernodes=num_nodes + outsiders)
        export_partitions(federated_split(config_with_overrides(split)), num_nodes, folder / "data")
        # What `flwr run .` packs, staged once: Flower walks the whole folder, a virtual environment included, at
        # every `flwr run` (about 10 s on a loaded machine).
        self.app = stage_app(PROJECT, folder / "app")
        self.marker = uuid.uuid4().hex
        flwr_home = folder / "flwr-home"
        flwr_home.mkdir(exist_ok=True)
        self.env = deployment_env(flwr_home, self.marker, supernode_args)
        self.port = free_port()
        (flwr_home / "config.toml").write_text(
            f'[superlink]\ndefault = "deploy"\n\n'
            f'[superlink.deploy]\naddress = "127.0.0.1:{self.port}"\nroot-certificates = "{self.keys / "ca.crt"}"\n'
        )
        self.link_state = folder / "superlink"
        self.node_states = [folder / "nodes" / f"node-{i}" for i in range(num_nodes)]
        self.node_address = [f"127.0.0.2:{self.port}"] * num_nodes
        self.node_ports = [free_port() for _ in range(num_nodes)]
        self.node_preexec: list[Callable[[], None] | None] = [None] * num_nodes
        self.starts = [0] * num_nodes  # how often each SuperNode was started

    # Commands.
    def sh(
        self, *args: str, timeout: float = 120, preexec_fn: Callable[[], None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, check=False, env=self.env, cwd=PROJECT, capture_output=True, text=True, timeout=timeout,
            preexec_fn=preexec_fn,
        )  # fmt: skip

    def flwr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.sh(str(BIN / "flwr"), *args, timeout=timeout)

    def flwr_json(self, *args: str) -> dict[str, object]:
        """A ``flwr ... --format json`` reply; ``success`` false with the output when it is not JSON."""
        result = self.flwr(*args, "--format", "json")
        try:
            reply = json.loads(result.stdout)
        except json.JSONDecodeError:
            return {"success": False, "error-message": result.stdout + result.stderr}
        return reply if isinstance(reply, dict) else {"success": False, "error-message": result.stdout}

    # The SuperLink.
    def start_superlink(self) -> None:
        started = self.sh(str(SCRIPTS / "start-superlink.sh"), str(self.link_state), str(self.keys), "0.0.0.0",
                          str(self.port))  # fmt: skip
        if started.returncode != 0:
            raise RuntimeError(f"start-superlink.sh failed: {started.stdout}{started.stderr}")
        wait_for(lambda: self.flwr_json("supernode", "list", "deploy").get("success"), 90, "the Control API")

    def superlink_pid(self) -> int | None:
        return pid_in(self.link_state / "superlink.pid")

    def stop_superlink(self) -> None:
        stopped = self.sh(str(SCRIPTS / "stop.sh"), str(self.link_state))
        if stopped.returncode != 0:
            raise RuntimeError(f"stop.sh failed: {stopped.stdout}{stopped.stderr}")

    def kill_superlink(self) -> None:
        """``kill -9`` the SuperLink's process group, as a crash or a power cut would end it (its ServerApp, in a
        session of its own, notices its parent gone and stops)."""
        pid = self.superlink_pid()
        if pid is None:
            raise RuntimeError("no SuperLink is running")
        os.killpg(pid, signal.SIGKILL)
        (self.link_state / "superlink.pid").unlink()

    def register_nodes(self) -> None:
        for i in range(self.num_nodes):
            registered = self.flwr("supernode", "register", str(self.keys / f"supernode-{i}.pub"), "deploy")
            if registered.returncode != 0:
                raise RuntimeError(f"registering supernode-{i}: {registered.stdout}{registered.stderr}")

    def node_status(self) -> dict[str, str]:
        """Node id (as ``flwr supernode list`` prints it) -> status (online, offline, ...) in the SuperLink's view;
        RuntimeError when the SuperLink gives no listing (never an empty one in its place)."""
        reply = self.flwr_json("supernode", "list", "deploy")
        nodes = reply.get("nodes")
        if not reply.get("success") or not isinstance(nodes, list):
            raise RuntimeError(f"flwr supernode list gave no listing: {str(reply)[-500:]}")
        return {str(n["node-id"]): n["status"] for n in nodes}

    def listed_status(self, timeout: float = 120) -> dict[str, str]:
        """``node_status``, asked again (every second, until ``timeout``) while the SuperLink gives no listing."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.node_status()
            except RuntimeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(1.0)

    def online_nodes(self) -> set[str]:
        """The ids of the nodes the SuperLink lists as online."""
        return online(self.node_status())

    def _listed_online(self, enough: Callable[[set[str]], bool]) -> bool:
        """Whether the online nodes are ``enough``; a listing the SuperLink did not give counts as not yet."""
        try:
            return enough(self.online_nodes())
        except RuntimeError:
            return False

    def wait_all_online(self, timeout: float = 120) -> None:
        wait_for(lambda: self._listed_online(lambda on: len(on) == self.num_nodes), timeout, "every node online")

    def wait_online(self, nodes: set[str], timeout: float = 120) -> None:
        """Until every node of ``nodes`` is listed online."""
        wait_for(lambda: self._listed_online(nodes.issubset), timeout, f"the {len(nodes)} nodes online before")

    # SuperNodes.
    def start_node(self, i: int) -> None:
        data = self.folder / "data" / f"node-{i}"
        started = self.sh(
            str(SCRIPTS / "start-supernode.sh"),
            str(self.node_states[i]),
            self.node_address[i],
            str(self.keys / "ca.crt"),
            str(self.keys / f"supernode-{i}"),
            str(self.node_ports[i]),
            f'partition-id={i} num-partitions={self.num_nodes} data-path="{data}"',
            preexec_fn=self.node_preexec[i],
        )
        if started.returncode != 0:
            raise RuntimeError(f"start-supernode.sh {i} failed: {started.stdout}{started.stderr}")
        self.starts[i] += 1

    def outsider_state(self, j: int) -> Path:
        return self.folder / "nodes" / f"outsider-{j}"

    def start_outsider(self, j: int) -> None:
        """A SuperNode with the unregistered key ``supernode-<num_nodes + j>``, and node 0's data folder (it must
        never be asked for it)."""
        started = self.sh(
            str(SCRIPTS / "start-supernode.sh"),
            str(self.outsider_state(j)),
            f"127.0.0.2:{self.port}",
            str(self.keys / "ca.crt"),
            str(self.keys / f"supernode-{self.num_nodes + j}"),
            str(free_port()),
            f'partition-id=0 num-partitions={self.num_nodes} data-path="{self.folder / "data" / "node-0"}"',
        )
        if started.returncode != 0:
            raise RuntimeError(f"start-supernode.sh outsider {j} failed: {started.stdout}{started.stderr}")

    def outsider_log(self, j: int) -> str:
        path = self.outsider_state(j) / "supernode.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def start_nodes(self) -> None:
        for i in range(self.num_nodes):
            self.start_node(i)

    def node_pid(self, i: int) -> int | None:
        return pid_in(self.node_states[i] / "supernode.pid")

    def node_alive(self, i: int) -> bool:
        pid = self.node_pid(i)
        if pid is None:
            return False
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    def node_log(self, i: int) -> str:
        path = self.node_states[i] / "supernode.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    # Runs.
    def results(self, run_name: str) -> Path:
        return self.folder / "results" / run_name

    def submit(self, run_name: str, settings: str) -> str:
        """Submit the app with ``settings`` (run-config text) as ``run_name``; its run id."""
        overrides = f'{settings} run-name="{run_name}" results-dir="{self.folder / "results"}"'
        reply = self.flwr_json("run", str(self.app), "deploy", "--run-config", overrides)
        if not reply.get("success"):
            raise RuntimeError(f"flwr run {run_name}: {reply}")
        return str(reply["run-id"])

    def run_record(self, run_id: str) -> dict[str, object]:
        """The run's entry in ``flwr ls`` (its ``status``, ``status-details``, ...); empty when it is not listed."""
        runs = self.flwr_json("ls", "deploy").get("runs", [])
        listed = [r for r in runs if str(r.get("run-id")) == run_id] if isinstance(runs, list) else []
        return dict(listed[0]) if listed else {}

    def run_status(self, run_id: str) -> str | None:
        status = self.run_record(run_id).get("status")
        return None if status is None else str(status)

    def close(self) -> list[int]:
        """Stop the SuperNodes and the SuperLink with ``stop.sh``; the PIDs that outlived it (killed here)."""
        outsiders = [self.outsider_state(j) for j in range(self.outsiders)]
        self.sh(str(SCRIPTS / "stop.sh"), *map(str, [*self.node_states, *outsiders, self.link_state]))
        leftovers = processes_marked(self.marker, MARKER)
        for pid in leftovers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return leftovers
