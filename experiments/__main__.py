"""``python -m experiments run|report|check FILE [--results-dir DIR] [--only PATTERN ...]``;
``python -m experiments cka --help``; ``python -m experiments docs [--check]``.

run     runs every unfinished cell of the experiment file (resumable), then writes its tables and figures
report  writes the tables and figures from the cells finished so far
check   validates the file and lists its cells, running nothing; loads each cell's datasets and draws its split, and
        fails when a dataset is missing or a split cannot be drawn over the clients (``run`` checks its unfinished
        cells so before running any)
cka     linear CKA between client-updated models (the FedFT-EDS paper's Fig. 2-4)
docs    rewrites the generated blocks of README.md and docs/results.md from the recorded summaries (``--check``:
        compare only)

--in-process  runs the cells in this process, without Ray or a SuperLink (small experiments, busy machines)
--batched-cohorts  with --in-process: each round's clients train as one batched computation (vmap); the methods on
        the shared client step with the plain objective (FedAvg, the FedFT family, FedEntOpt's selection)
--only  restricts run and check to the cells whose name matches a shell-style pattern (repeatable), e.g.
        --only 'fedft-*' --only '*__seed0'; the report always covers every cell of the file
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from experiments.doc_tables import pages
from experiments.preflight import cell_problems
from experiments.report import write_report
from experiments.runner import (
    StaleResultsError,
    cell_run_config,
    default_results_dir,
    run_experiment,
    simulate_cell,
    unfinished_cells,
)
from experiments.spec import ExperimentFileError, load_experiment, select_cells
from run_config.defaults import load_defaults
from simulation.batched_cohorts import refusal
from simulation.in_process import run_cell_in_process
from simulation.local_run import add_placement_arguments, exit_on_sigterm


def _experiment_command(args: argparse.Namespace) -> int:
    try:
        experiment = load_experiment(args.file)
    except ExperimentFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        selected = select_cells(experiment.cells, tuple(args.only))
    except ValueError as err:
        print(f"error: {args.file}: {err}", file=sys.stderr)
        return 2
    results_dir = args.results_dir or default_results_dir(experiment)
    checked = {"check": selected, "run": unfinished_cells(selected, results_dir), "report": ()}[args.command]
    problems = cell_problems(checked, experiment.clients, results_dir)
    for problem in problems:
        print(f"error: {args.file}: {problem}", file=sys.stderr)
    if args.command == "check":
        print(f"{args.file}: {len(selected)} cells, {experiment.clients} clients each; cost: {experiment.cost}")
        for cell in selected:
            print(f"  {cell.name}")
        return 2 if problems else 0
    if problems:
        return 2
    if args.batched_cohorts:
        if not args.in_process:
            print("error: --batched-cohorts needs --in-process (simulated clients in one process)", file=sys.stderr)
            return 2
        for cell in selected:
            why = refusal({**load_defaults(), **cell_run_config(cell, results_dir)})
            if why:
                print(f"error: {args.file}: cell {cell.name}: {why}", file=sys.stderr)
                return 2
    in_process = functools.partial(run_cell_in_process, batched=args.batched_cohorts)
    code = 0
    if args.command == "run":
        print(f"{experiment.name}: {len(selected)} cells; stated cost: {experiment.cost}", flush=True)
        try:
            outcome = run_experiment(
                experiment,
                results_dir,
                run_cell=in_process if args.in_process else simulate_cell,
                echo=lambda line: print(line, flush=True),
                cells=selected,
                gpus_per_client=args.gpus_per_client,
                ray_address=args.ray_address,
            )
        except StaleResultsError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        code = 1 if outcome.failed else 0
    for path in write_report(experiment, results_dir):
        print(f"wrote {path}")
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cka"]:
        from experiments.client_similarity import main as cka_main

        return cka_main(argv[1:])
    if argv[:1] == ["docs"]:
        return pages.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m experiments", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("run", "report", "check"))
    parser.add_argument("file", type=Path, help="experiment file, e.g. experiments/smoke.yaml")
    parser.add_argument("--results-dir", type=Path, help="default: results/experiments/<name>")
    add_placement_arguments(parser)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run each cell in this process, clients one after another, without Ray or a SuperLink",
    )
    parser.add_argument(
        "--batched-cohorts",
        action="store_true",
        help="with --in-process: train each round's clients as one batched computation (vmap over their parameters)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run or list only the cells whose name matches (shell-style; repeatable)",
    )
    return _experiment_command(parser.parse_args(argv))


if __name__ == "__main__":
    exit_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the running cell recorded its stop (simulation/local_run.py)
        print("stopped (Ctrl-C): `run` again goes on, skipping finished cells and resuming this one", file=sys.stderr)
        sys.exit(130)
