"""A SuperNode in a container built from ``deployment/Dockerfile.supernode`` joins a loopback deployment (TLS,
SuperNode authentication, the loopback gate) beside a SuperNode started with ``deployment/start-supernode.sh``, and a
2-round FedAvg run trains on both.

Needs a Docker engine (``DOCKER_HOST`` or the default socket) and the image built beforehand as
``$FEDFT_DOCKER_IMAGE`` (default ``fedft-supernode``): ``docker build -f deployment/Dockerfile.supernode -t
fedft-supernode .``. Opt-in, ``FEDFT_DOCKER_E2E=1``; measurements/deployment/docker.md says how it was built and run
here, where Docker Hub cannot be reached."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deployment.loopback import wait_for
from simulation.local_run import free_port
from tests.deployment_faults import Deployment, read_rounds, trained

IMAGE = os.environ.get("FEDFT_DOCKER_IMAGE", "fedft-supernode")
APP_UID = 49999  # the user `app` of Flower's images, which runs the SuperNode in the container


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("FEDFT_DOCKER_E2E") != "1", reason="opt-in: set FEDFT_DOCKER_E2E=1 (Docker engine)")
@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client")
def test_a_containerised_supernode_joins_and_trains(tmp_path: Path) -> None:
    assert docker("image", "inspect", IMAGE).returncode == 0, f"build the image first: {IMAGE}"
    deployment = Deployment(tmp_path, num_nodes=2)
    container = f"fedft-supernode-{deployment.marker[:12]}"
    # The container's user reads the node's key (mode 600) and data: give the key to that user, as on a device.
    mounted = tmp_path / "container-keys"
    mounted.mkdir()
    for name in ("ca.crt", "supernode-1"):
        shutil.copy2(deployment.keys / name, mounted / name)
        os.chown(mounted / name, APP_UID, -1)
    leftovers: list[int] = []
    try:
        deployment.start_superlink()
        deployment.register_nodes()
        deployment.start_node(0)
        started = docker(
            "run", "-d", "--name", container, "--network", "host",
            "-v", f"{mounted}:/keys:ro", "-v", f"{tmp_path / 'data' / 'node-1'}:/data:ro",
            IMAGE,
            "--superlink", f"127.0.0.2:{deployment.port}", "--root-certificates", "/keys/ca.crt",
            "--auth-supernode-private-key", "/keys/supernode-1", "--port", str(free_port()),
            "--node-config", 'partition-id=1 num-partitions=2 data-path="/data"',
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        deployment.wait_all_online()
        run_id = deployment.submit("docker", "num-server-rounds=2 client-threads=1 node-wait-seconds=60.0")
        wait_for(lambda: str(deployment.run_status(run_id)).startswith("finished"), 600, "the run", every=2.0)
        log = docker("logs", container).stdout + docker("logs", container).stderr
        (tmp_path / "container.log").write_text(log)
        assert deployment.run_status(run_id) == "finished:completed", log[-3000:]
        rounds = read_rounds(deployment.results("docker"))
        assert [r["round"] for r in rounds] == [1, 2]
        for record in rounds:
            assert trained(record) == [0, 1] and record["timed_out"] == [] and record["failed"] == [], record
        exported = json.loads((tmp_path / "data" / "node-1" / "partition.json").read_text())
        [stats] = [s for s in rounds[0]["client_stats"] if s["partition_id"] == 1]
        assert stats["num_local"] == exported["num-samples"]  # the container trained on its mounted folder
        print("rounds:", [(r["round"], round(r["wall_seconds"], 1), trained(r)) for r in rounds])
    finally:
        docker("stop", "-t", "10", container)
        docker("rm", "-f", container)
        leftovers = deployment.close()
    assert leftovers == [], "a SuperLink, SuperNode or app process outlived stop.sh"
    assert container not in docker("ps", "-a", "--format", "{{.Names}}").stdout
