"""Round time and peak memory against the population and the clients per round, for FedAvg and FedFT-EDS.

    python -m benchmarks.cost_model [--methods fedavg fedft-eds] [--rounds 3]

Whole simulations (``python -m simulation``, as ``benchmarks.scale`` runs them, every process's PSS summed every
0.5 s and the peak broken down by process kind): populations 10, 100, 1,000 and 10,000 at 10 clients per round,
and 1 and 100 clients per round at a population of 100. The workload is small so that the grid fits a 2-core
machine: full Fashion-MNIST split IID (48,000 training images over the population: a client's data shrinks as the
population grows), LeNet-5 (``--model``: another) from random weights, one local epoch. Each run is written to
``measurements/benchmarks/cost_model.json`` as soon as it ends (with the load average around it), and a Markdown
table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from benchmarks import RESULTS_DIR
from benchmarks.scale import measure

#: (population, clients per round): the population curve at 10 per round, then the cohort curve at 100.
GRID = ((10, 10), (100, 10), (1000, 10), (10000, 10), (100, 1), (100, 100))
WORKLOAD = "dataset='fashion-mnist' partitioner='iid' pretrain='none' local-epochs=1"


def workload(method: str, model: str) -> str:
    """The run-config text of one method's runs."""
    return f"{WORKLOAD} model='{model}' method='{method}'"


def _cell(run: dict) -> tuple:
    return run["method"], run.get("model", "lenet5"), run["clients"], run["clients_per_round"]


#: Training images the clients share (full Fashion-MNIST less the server's public 20%).
CLIENT_IMAGES = 48_000


def _images(count: float) -> str:
    return f"{count:,.0f}" if count >= 10 else f"{count:.1f}"


def table(runs: list[dict]) -> str:
    """The runs as a Markdown table, with what the peak is made of: the simulation engine's process (the ServerApp,
    Ray's driver, every SuperNode's context) and the ClientApp actors."""
    lines = [
        "| method | model | clients | per round | images per client | round 1 (s) | later rounds, median (s) "
        "| whole run (s) | peak PSS (GiB) | of it: engine + ServerApp, actors (GiB) | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cell = (
            f"| {r['method']} | {r.get('model', 'lenet5')} | {r['clients']:,} | {r['clients_per_round']} "
            f"| {_images(CLIENT_IMAGES / r['clients'])} "
        )
        if r["exit_code"] != 0 or r["round_1_seconds"] is None:
            lines.append(f"{cell}| failed: exit code {r['exit_code']} |")
            continue
        parts = r["peak_by_kind_mib"]
        lines.append(
            f"{cell}| {r['round_1_seconds']:.1f} | {r['later_round_seconds_median']:.1f} | {r['total_seconds']:.0f} "
            f"| {r['peak_memory_gib']:.2f} "
            f"| {parts.get('simulation engine', 0) / 1024:.2f}, {parts.get('client actor', 0) / 1024:.2f} "
            f"| {r['load_average_before'][0]:.1f} → {r['load_average_after'][0]:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["fedavg", "fedft-eds"])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="only these cells, as population/per-round, e.g. 100/1")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "cost_model.json")
    parser.add_argument("--table", action="store_true", help="print the table of the recorded runs; run nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(args.out.read_text())["runs"]))
        return
    cells = [cell for cell in GRID if not args.only or f"{cell[0]}/{cell[1]}" in args.only]
    previous = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for population, per_round in cells:
            for method in args.methods:
                name = f"cost-{method}-{args.model}-{population}-{per_round}"
                text = workload(method, args.model)
                result = measure(population, per_round, args.rounds, 1, Path(tmp), args.out.parent, text, name)
                runs.append({"method": method, "model": args.model, "rounds": args.rounds, "workload": text, **result})
                done = {_cell(r) for r in runs}
                kept = [r for r in previous if _cell(r) not in done]
                args.out.write_text(json.dumps({"cpus": os.cpu_count(), "runs": kept + runs}, indent=1) + "\n")
    print(table(runs))


if __name__ == "__main__":
    main()
