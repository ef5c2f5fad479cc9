"""What a simulated run's fixed cost is made of: the time line of one short run, from Flower's own log lines.

    python -m benchmarks.launch_timeline [--rounds 1] [--num-supernodes 10] [--run-config "..."]

Runs ``python -m simulation``'s launcher once with ``FLWR_LOG_LEVEL=DEBUG``, so that the SuperLink, the simulation
engine and the ServerApp log with millisecond timestamps, keeps the SuperLink's folder, and prints when each milestone
came: the SuperLink up, the run submitted by ``flwr run``, the engine started, the ClientApp loaded, Ray started, the
actors up, the clients answered, the rounds, the ServerApp done, Ray stopped, the run marked finished, the launcher
done. The gaps between milestones are what ``benchmarks.profile_run`` calls start-up, node-wait and shutdown.
The printed table goes to ``--out`` too (Markdown).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks import RESULTS_DIR
from run_config.text import parse_overrides
from simulation.local_run import run_simulation

#: (milestone, the log it is in, a pattern of its line); the first matching line of each counts.
MILESTONES: tuple[tuple[str, str, str], ...] = (
    ("SuperLink starts", "superlink", r"Starting Flower SuperLink"),
    ("SuperLink listens", "superlink", r"Uvicorn running on"),
    ("run submitted (flwr run)", "superlink", r"ControlServicer\.StartRun"),
    ("simulation engine starts", "stream", r"Starting Flower Simulation"),
    ("ClientApp module loaded in the engine", "stream", r"Loading ClientApp"),
    ("Ray starts", "stream", r"Initialising: RayBackend"),
    ("Ray's actors made", "stream", r"Constructed ActorPool"),
    ("every client answered the identity query", "stream", r"clients connected; partition sizes"),
    ("strategy starts", "stream", r"Starting \w+ strategy"),
    ("rounds done", "stream", r"Strategy execution finished"),
    ("ServerApp done", "stream", r"ServerApp finished running"),
    ("actors stopped", "stream", r"Terminated \d+ actors"),
    ("Ray stopped", "stream", r"Terminated RayBackend"),
    ("run marked finished", "superlink", r"Finished task"),
    ("log stream ends", "superlink", r"All logs for run ID"),
    ("SuperLink stopped", "superlink", r"Finished server process"),
)
STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3})(Z?)")


def stamp_of(line: str) -> float | None:
    """Seconds since the epoch of a log line's timestamp, or None: Flower's own lines are in local time, the
    SuperLink's web server's (``...T08:34:45.459Z``) in UTC."""
    found = STAMP.search(line)
    if found is None:
        return None
    when = datetime.strptime(found.group(1).replace("T", " ").replace(",", "."), "%Y-%m-%d %H:%M:%S.%f")
    return when.replace(tzinfo=timezone.utc).timestamp() if found.group(2) else when.timestamp()


def first_stamps(logs: dict[str, list[str]]) -> dict[str, float]:
    """Each milestone's time: the timestamp of the first line of its log that matches its pattern."""
    found: dict[str, float] = {}
    for name, log, pattern in MILESTONES:
        for line in logs.get(log, []):
            if re.search(pattern, line) and (when := stamp_of(line)) is not None:
                found[name] = when
                break
    return found


def timeline(start: float, end: float, stamps: dict[str, float]) -> list[str]:
    """Markdown rows: each milestone in time order, its second since the launch and the gap since the previous one."""
    rows = ["| milestone | at (s) | since the previous (s) |", "|---|---|---|", "| launcher starts | 0.00 | |"]
    previous = start
    for name, when in sorted([*stamps.items(), ("launcher done", end)], key=lambda item: item[1]):
        rows.append(f"| {name} | {when - start:.2f} | {when - previous:.2f} |")
        previous = when
    return rows


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--num-supernodes", type=int, default=10)
    parser.add_argument("--run-config", default="", help="further overrides, as for python -m simulation")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "launch_timeline.md")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedft-timeline-"))
    overrides = {**parse_overrides(args.run_config), "num-server-rounds": args.rounds, "results-dir": str(work)}
    os.environ["FLWR_LOG_LEVEL"] = "DEBUG"
    start = time.time()
    with (work / "stream.log").open("wb") as stream:
        code = run_simulation(
            overrides, num_supernodes=args.num_supernodes, flwr_home=work / "flwr-home", stream_to=stream
        )
    end = time.time()
    logs = {
        "stream": (work / "stream.log").read_text(errors="replace").splitlines(),
        "superlink": (work / "flwr-home" / "superlink.log").read_text(errors="replace").splitlines(),
    }
    load = os.getloadavg()[0]
    rows = [
        f"One run of {args.rounds} round(s), {args.num_supernodes} clients, exit code {code}, "
        f"{end - start:.1f} s; 1-minute load average {load:.1f} at the end. Logs in {work}.",
        "",
        *timeline(start, end, first_stamps(logs)),
    ]
    print("\n".join(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(rows) + "\n")
    return rows


if __name__ == "__main__":
    main()
