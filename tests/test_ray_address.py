"""A ``--ray-address`` where nothing listens is refused at start in one line naming it, with exit code 2, instead of
Ray retrying for minutes inside the run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from run_config.settings import ConfigError
from simulation.local_run import PROJECT_DIR, free_port
from simulation.ray_address import check_ray_address, host_and_port


def test_the_address_forms_ray_takes_are_split() -> None:
    assert host_and_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert host_and_port("ray://head.example:10001") == ("head.example", 10001)
    assert host_and_port("[::1]:6379") == ("::1", 6379)


@pytest.mark.parametrize("address", ["10.0.0.5", "head:", ":6379", "head:port", "head:70000"])
def test_an_address_without_a_port_is_refused_by_name(address: str) -> None:
    with pytest.raises(ConfigError, match=f"--ray-address '{address}' is not host:port"):
        check_ray_address(address)


def test_a_listening_address_and_rays_keywords_pass() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_ray_address(f"127.0.0.1:{server.getsockname()[1]}")
    for address in ("", "auto", "local"):
        check_ray_address(address)


def test_an_address_where_nothing_listens_is_refused_by_name() -> None:
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(
        ConfigError, match=rf"--ray-address '{address}': no Ray head answers there \(Connection refused\)"
    ):
        check_ray_address(address)


def test_the_launcher_refuses_it_in_one_line_within_seconds() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    launcher = subprocess.Popen(
        [sys.executable, "-m", "simulation", "--ray-address", address, "--run-config", "dataset=synthetic"],
        cwd=PROJECT_DIR,
        env={**os.environ, "PYTHONPATH": str(PROJECT_DIR)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = launcher.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        launcher.terminate()  # SIGTERM: a launcher that went on to start a run stops it by PID on its way out
        launcher.communicate(timeout=120)
        pytest.fail(f"python -m simulation --ray-address {address} still ran after 120 s")
    seconds = time.monotonic() - started
    assert launcher.returncode == 2, stderr
    assert stderr.splitlines() == [
        f"error: --ray-address '{address}': no Ray head answers there (Connection refused); start the cluster's head "
        "with `ray start --head --port PORT` and pass its HOST:PORT"
    ]
    assert seconds < 60, f"took {seconds:.1f} s"  # the imports only; Ray alone retried for minutes
