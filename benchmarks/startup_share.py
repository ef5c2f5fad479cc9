"""The app's own share of a ClientApp's and a ServerApp's start: import time split into torch, flwr and this app's
modules, and the first message's data work per node.

    python -m benchmarks.startup_share [--repeats 5] [--nodes 10] [--dataset fashion-mnist-mini]

Each repeat is a fresh interpreter (``python -X importtime``), one thread. ``benchmarks/launch_timeline.py`` splits a
simulated run's fixed cost by Flower's own log lines (Ray's start, the actors, the identity query); this splits what
an actor or the ServerApp process spends importing, and what answering the identity query costs each node (its
partition and labels). Writes ``measurements/benchmarks/startup_share.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import RESULTS_DIR
from simulation.local_run import PROJECT_DIR

#: Top-level packages of this app (what it could cut), against torch's and flwr's.
APP_PACKAGES = frozenset(
    {"client_app", "server_app", "methods", "strategies", "run_config", "protocol", "models", "data", "profiling"}
)
ENTRY_POINTS = {"ClientApp": "client_app.app", "ServerApp": "server_app.app"}

NODE_WORK = """
import json, sys, time
from flwr.app import Context, RecordDict
import client_app.app as client
from run_config.defaults import load_defaults
config = {**load_defaults(), "dataset": sys.argv[2]}
nodes = int(sys.argv[1])
seconds = []
for pid in range(nodes):
    context = Context(run_id=1, node_id=100 + pid, node_config={"partition-id": pid, "num-partitions": nodes},
                      state=RecordDict(), run_config=config)
    start = time.perf_counter()
    len(client.node_of(context).labels())
    seconds.append(time.perf_counter() - start)
print(json.dumps(seconds))
"""


def import_split(module: str) -> dict[str, float]:
    """Seconds of importing ``module`` in a fresh interpreter, each imported module's own (self) time given to its
    package: torch, flwr, this app, or other (numpy, grpc and the rest of the dependencies)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_DIR)}
    stderr = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    groups = {"torch": 0.0, "flwr": 0.0, "app": 0.0, "other": 0.0}
    for line in stderr.splitlines():
        fields = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if not line.startswith("import time:") or len(fields) != 3 or not fields[0].isdigit():
            continue
        top = fields[2].split(".")[0]
        group = (
            "torch"
            if top in ("torch", "torchgen")
            else "flwr"
            if top == "flwr"
            else "app"
            if top in APP_PACKAGES
            else "other"
        )
        groups[group] += int(fields[0]) / 1e6
    return groups


def node_seconds(nodes: int, dataset: str) -> list[float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", NODE_WORK, str(nodes), dataset],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [float(s) for s in json.loads(out.strip().splitlines()[-1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "startup_share.json")
    args = parser.parse_args(argv)
    load = [round(x, 2) for x in os.getloadavg()]
    imports: dict[str, dict[str, float]] = {}
    for label, module in ENTRY_POINTS.items():
        runs = [import_split(module) for _ in range(args.repeats)]
        imports[label] = {group: statistics.median(run[group] for run in runs) for group in runs[0]}
    result: dict[str, object] = {"repeats": args.repeats, "load": load, **imports}
    per_node = [node_seconds(args.nodes, args.dataset) for _ in range(args.repeats)]
    result["identity_first_node_seconds"] = statistics.median(run[0] for run in per_node)
    result["identity_other_nodes_seconds"] = statistics.median(statistics.median(run[1:]) for run in per_node)
    result["dataset"] = args.dataset
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"medians of {args.repeats} fresh interpreters, one thread; 1-minute load {load[0]}")
    print("| process | torch (s) | flwr (s) | this app (s) | other (s) |\n|---|---|---|---|---|")
    for label, row in imports.items():
        print(f"| {label} | {row['torch']:.2f} | {row['flwr']:.2f} | {row['app']:.2f} | {row['other']:.2f} |")
    print(
        f"identity query's data work ({args.dataset}): first node {result['identity_first_node_seconds']:.3f} s, "
        f"each later node {result['identity_other_nodes_seconds']:.4f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
