"""``python -m deployment.gated_superlink [flower-superlink options]``: ``flower-superlink`` behind the loopback gate.

It runs Flower's own ``flower-superlink`` command with the same options and adds ``LoopbackGate`` (see
``deployment/loopback_gate.py``) to its HTTP app through Flower's SuperLink extension hook, so the Fleet API is
served on every address the SuperLink binds while the Control and Runtime APIs answer only on 127.0.0.1.

It refuses to start in the two set-ups the gate cannot protect: a ``--host`` other than a wildcard (0.0.0.0,
::) or loopback address (the ServerApp, launched by the SuperLink, connects to that host and would be
refused), and Flower's internal switches that open an additional gRPC Control or Fleet API on other ports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from flwr.superlink import extensions
from flwr.superlink.cli.flower_superlink import flower_superlink
from starlette.middleware import Middleware

from deployment.loopback_gate import LoopbackGate

GATE_HOSTS = ("0.0.0.0", "::", "127.0.0.1", "::1")
UNGATED_SWITCHES = ("FLWR_INTERNAL_GRPC_CONTROL_API", "FLWR_INTERNAL_GRPC_FLEET_API")
DEFAULT_HOST = "127.0.0.1"  # flower-superlink's own default


def bind_host(argv: Sequence[str]) -> str:
    """The ``--host`` value among flower-superlink's arguments (its default when absent)."""
    for i, arg in enumerate(argv):
        if arg == "--host" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--host="):
            return arg.split("=", 1)[1]
    return DEFAULT_HOST


def startup_problem(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Why the gate could not protect a SuperLink started with these arguments and environment, or None."""
    host = bind_host(argv)
    if host.strip("[]") not in GATE_HOSTS:
        return (
            f"--host {host}: bind to 0.0.0.0 (all addresses; let the firewall choose which are public) or "
            "127.0.0.1, so that the Control and Runtime APIs stay reachable on 127.0.0.1"
        )
    switched_on = [name for name in UNGATED_SWITCHES if environ.get(name) == "1"]
    if switched_on:
        return f"{', '.join(switched_on)}=1 opens a gRPC API that the loopback gate does not cover; unset it"
    return None


def refuse_if_unprotected(argv: Sequence[str], environ: Mapping[str, str]) -> None:
    """Exit with the reason when ``startup_problem`` finds one (start-superlink.sh calls this before starting)."""
    problem = startup_problem(argv, environ)
    if problem:
        sys.exit(f"gated_superlink: refusing to start: {problem}")


def install_gate() -> None:
    """Make Flower's SuperLink extension hook return ``LoopbackGate`` first, before any other middleware.

    ``flwr.superlink.main.create_app`` asks ``extensions.get_middleware()`` for the outermost middleware when
    the SuperLink starts; that hook is otherwise filled only by Flower Enterprise.
    """
    original: Callable[[], tuple[Middleware, ...]] = extensions.get_middleware

    def get_middleware() -> tuple[Middleware, ...]:
        return (Middleware(LoopbackGate), *original())

    extensions.get_middleware = get_middleware


def main() -> None:
    refuse_if_unprotected(sys.argv[1:], os.environ)
    install_gate()
    flower_superlink()


if __name__ == "__main__":
    main()
