"""The loopback gate in front of the SuperLink: which requests reach Flower, and when the launcher refuses to start.

The end-to-end proof (real SuperLink, flwr CLI refused on the public address) is in test_deployment.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from deployment.gated_superlink import bind_host, refuse_if_unprotected, startup_problem
from deployment.loopback_gate import LoopbackGate, admits


@pytest.mark.parametrize(
    "path",
    [
        "/v1/control/start-run",
        "/v1/control/register-node",
        "/v1/control/list-runs",
        "/v1/runtime/acquire-task",
        "/docs",
        "/openapi.json",
        "/v1/fleetx",
        "/",
    ],
)
def test_control_runtime_and_anything_else_need_a_local_connection(path: str) -> None:
    assert admits(path, "127.0.0.1", "127.0.0.1")
    assert admits(path, "::1", "::1")
    assert admits(path, "::ffff:127.0.0.1", "::ffff:127.0.0.1")  # IPv4 on a dual-stack (::) socket
    assert not admits(path, "10.0.0.5", "10.0.0.9")  # from the network to the public address
    assert not admits(path, "10.0.0.5", "10.0.0.5")  # from this machine, but to its public address
    assert not admits(path, "127.0.0.2", "127.0.0.1")  # to another loopback address than 127.0.0.1
    assert not admits(path, "127.0.0.1", "10.0.0.9")  # to 127.0.0.1 from outside (route_localnet)
    assert not admits(path, None, None)  # a Unix socket: no addresses


@pytest.mark.parametrize("path", ["/v1/fleet/register-node", "/v1/fleet/pull-messages", "/health"])
def test_fleet_api_and_health_are_public(path: str) -> None:
    assert admits(path, "10.0.0.5", "203.0.113.7")


def call(gate: LoopbackGate, path: str, server: str, client: str) -> tuple[list[dict], list[str]]:
    """Send one HTTP request through the gate; what it sent back, and the paths that reached the app."""
    reached: list[str] = []
    sent: list[dict] = []

    async def app(scope, receive, send) -> None:
        reached.append(scope["path"])

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    gate.app = app
    scope = {"type": "http", "path": path, "server": (server, 9093), "client": (client, 50000)}
    asyncio.run(gate(scope, receive, send))
    return sent, reached


def test_gate_answers_403_with_a_detail_and_passes_the_rest_through() -> None:
    gate = LoopbackGate(app=None)  # type: ignore[arg-type]
    sent, reached = call(gate, "/v1/control/start-run", "10.0.0.5", "203.0.113.7")
    assert reached == [] and sent[0]["status"] == 403
    assert "only on 127.0.0.1" in json.loads(sent[1]["body"])["detail"]
    assert call(gate, "/v1/control/start-run", "127.0.0.1", "127.0.0.1") == ([], ["/v1/control/start-run"])
    assert call(gate, "/v1/fleet/push-messages", "10.0.0.5", "203.0.113.7") == ([], ["/v1/fleet/push-messages"])


def test_gate_leaves_the_lifespan_alone() -> None:
    reached: list[str] = []

    async def app(scope, receive, send) -> None:
        reached.append(scope["type"])

    asyncio.run(LoopbackGate(app)({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert reached == ["lifespan"]


def test_bind_host_reads_both_spellings_and_defaults_to_flowers_default() -> None:
    assert bind_host(["--insecure", "--host", "0.0.0.0", "--port", "9093"]) == "0.0.0.0"
    assert bind_host(["--host=::"]) == "::"
    assert bind_host(["--port", "9093"]) == "127.0.0.1"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "127.0.0.1", "::1"])
def test_launcher_accepts_wildcard_and_loopback_hosts(host: str) -> None:
    assert startup_problem(["--host", host], {}) is None


def test_launcher_refuses_a_specific_public_host() -> None:
    problem = startup_problem(["--host", "10.0.0.5"], {})
    assert problem is not None and "--host 10.0.0.5" in problem and "0.0.0.0" in problem
    with pytest.raises(SystemExit, match="refusing to start: --host 10.0.0.5"):
        refuse_if_unprotected(["--host", "10.0.0.5"], {})


@pytest.mark.parametrize("switch", ["FLWR_INTERNAL_GRPC_CONTROL_API", "FLWR_INTERNAL_GRPC_FLEET_API"])
def test_launcher_refuses_flowers_ungated_grpc_apis(switch: str) -> None:
    problem = startup_problem(["--host", "0.0.0.0"], {switch: "1"})
    assert problem is not None and switch in problem
    assert startup_problem(["--host", "0.0.0.0"], {switch: "0"}) is None


def test_install_gate_puts_it_outermost_in_flowers_superlink_app(monkeypatch: pytest.MonkeyPatch) -> None:
    from flwr.superlink import extensions
    from flwr.superlink.main import _get_middleware

    from deployment.gated_superlink import install_gate

    monkeypatch.setattr(extensions, "get_middleware", extensions.get_middleware)  # restored after the test
    assert LoopbackGate not in [m.cls for m in _get_middleware()]
    install_gate()
    assert _get_middleware()[0].cls is LoopbackGate
