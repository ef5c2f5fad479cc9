"""``--ray-address`` is checked at start: Ray, pointed at an address where nothing listens, retries for minutes
(``ray.init`` logged "Failed to connect to GCS ... within 5 seconds" every 36 s for 2.5 minutes in one check, Ray
2.55) inside the simulation engine, so the run looks hung. A TCP connection to the address tells at once."""

from __future__ import annotations

import socket

from run_config.settings import ConfigError

#: Addresses that name no socket: ``auto`` finds a cluster started on this machine (Ray says at once when there is
#: none), ``local`` starts a new one.
RAY_KEYWORDS = ("auto", "local")

#: Seconds to wait for the TCP handshake: a refused port answers at once, an unreachable host not at all.
CONNECT_TIMEOUT = 5.0


def host_and_port(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``ray://host:port`` split into its host and port; ``ConfigError`` if it is
    none of these."""
    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--ray-address {address!r} is not host:port (the head's address, e.g. 10.0.0.5:6379)")
    return host.strip("[]"), int(port)


def check_ray_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise ``ConfigError`` naming ``address`` when it is not host:port or nothing accepts a TCP connection there
    within ``timeout`` seconds. Empty (a private Ray instance) and Ray's keywords pass."""
    if not address or address in RAY_KEYWORDS:
        return
    host, port = host_and_port(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        reason = f"no answer within {timeout:g} s" if isinstance(err, TimeoutError) else err.strerror or str(err)
        raise ConfigError(
            f"--ray-address {address!r}: no Ray head answers there ({reason}); start the cluster's head with "
            "`ray start --head --port PORT` and pass its HOST:PORT"
        ) from err
