"""Keep the SuperLink's Control and Runtime APIs on loopback while its Fleet API stays public.

Flower 1.41 serves all three HTTP APIs of a SuperLink on one address (``--host``/``--port``): the Fleet API
(``/v1/fleet/``, SuperNodes, protected by ``--enable-supernode-auth``), the Control API (``/v1/control/``:
``flwr run/ls/stop/log/pull``, ``flwr supernode register``) and the Runtime API (``/v1/runtime/``: the
ServerApp's link). Without Flower Enterprise's account authentication, the Control and Runtime APIs accept any
caller who can reach the port and trusts the CA, so an outsider could register its own SuperNode key, start or
stop runs and read their logs. This ASGI middleware answers those routes only on connections that were made to
the loopback address (127.0.0.1 or ::1) from a loopback address, i.e. from a process on the SuperLink's own
machine (the operator's ``flwr`` there or through an SSH tunnel, and the SuperLink's own ServerApp); every
other request that is not for the Fleet API or ``/health`` gets HTTP 403.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PREFIXES = ("/v1/fleet/",)
PUBLIC_PATHS = ("/health",)
CONTROL_HOSTS = ("127.0.0.1", "::1")
REFUSAL = (
    "The SuperLink answers its Control and Runtime APIs only on 127.0.0.1 from its own machine; "
    "this address serves SuperNodes (Fleet API) only. Run flwr on the SuperLink's machine or through "
    "an SSH tunnel to its 127.0.0.1 port."
)


def _ip(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` names, with IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) unwrapped; None if none."""
    try:
        ip = ipaddress.ip_address(host or "")
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_public_path(path: str) -> bool:
    """Whether anyone who reaches the port may call ``path`` (the Fleet API and the health check)."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def is_local_connection(server_host: str | None, client_host: str | None) -> bool:
    """Whether a connection was made to 127.0.0.1 or ::1 from a loopback address (so from this machine)."""
    server, client = _ip(server_host), _ip(client_host)
    control = {ipaddress.ip_address(host) for host in CONTROL_HOSTS}
    return server in control and client is not None and client.is_loopback


def admits(path: str, server_host: str | None, client_host: str | None) -> bool:
    """Whether the gate lets a request for ``path`` on this connection through to Flower."""
    return is_public_path(path) or is_local_connection(server_host, client_host)


def _host(address: Any) -> str | None:
    """The host of an ASGI ``server``/``client`` entry ((host, port), or None for a Unix socket)."""
    return address[0] if address else None


class LoopbackGate:
    """ASGI middleware: HTTP 403 for every non-public route unless the connection is local (see ``admits``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not admits(
            scope.get("path", ""), _host(scope.get("server")), _host(scope.get("client"))
        ):
            await _refuse(scope, send)
            return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Send) -> None:
    """Answer 403 with a JSON ``detail`` (the ``flwr`` CLI prints it) or close a WebSocket."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"detail": REFUSAL}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
