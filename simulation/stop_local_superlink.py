"""``python -m simulation.stop_local_superlink``: stop the local SuperLink that ``flwr run .`` started and left
running, by its PID: the ``flower-superlink`` process serving Flower's local port (39091, or
``$FLWR_LOCAL_SUPERLINK_HTTP_API_PORT``), with its descendants (Ray's processes among them while a run is on). A
run still going is first stopped as on Ctrl-C, so its summary.json says ``interrupted`` (``stop_engines``). It
returns once they have ended, so a next run does not race them for the port, and exits 1 naming those it could
not stop."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from simulation.local_run import command_line, descendants, start_times, still_running, stop_engines, stop_processes

DEFAULT_PORT = "39091"


def local_superlink_pids(port: str) -> list[int]:
    """PIDs of ``flower-superlink`` processes started with ``--port <port>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        arguments = command_line(int(entry.name))
        named = any(a.endswith(b"flower-superlink") for a in arguments[:2])
        if named and b"--port" in arguments and arguments[arguments.index(b"--port") + 1 :][:1] == [port.encode()]:
            found.append(int(entry.name))
    return found


def main(argv: list[str] | None = None) -> int:
    """Stop the local SuperLink; takes no arguments but ``--help``, and refuses any other (it acts when run)."""
    argparse.ArgumentParser(prog="python -m simulation.stop_local_superlink", description=__doc__).parse_args(argv)
    port = os.environ.get("FLWR_LOCAL_SUPERLINK_HTTP_API_PORT", DEFAULT_PORT)
    pids = local_superlink_pids(port)
    if not pids:
        print(f"no local SuperLink is running on port {port}")
        return 0
    # Found before the engines end: Ray's daemons, their children, leave the tree when their engine has ended.
    tree = start_times([pid for superlink in pids for pid in (*descendants(superlink), superlink)])
    for superlink in pids:
        stop_engines(superlink)
    started_since = [pid for superlink in pids for pid in descendants(superlink) if pid not in tree]
    left = stop_processes([*still_running(tree), *started_since])
    if left:
        print(
            f"could not stop the local SuperLink on port {port}: PID {', '.join(map(str, left))} still running "
            "(another user's, or not ending on SIGKILL)",
            file=sys.stderr,
        )
        return 1
    print(f"stopped the local SuperLink on port {port} (PID {', '.join(map(str, pids))}) and what it started")
    return 0


if __name__ == "__main__":
    sys.exit(main())
