"""``python -m experiments run|check FILE [--results-dir DIR] [--only PATTERN ...]``;
``python -m experiments report FILE|FOLDER ... [--check]``; ``python -m experiments pack FOLDER ...``;
``python -m experiments cka --help``; ``python -m experiments docs [--check]``.

run     runs every unfinished cell of the experiment file (resumable), packs the finished cells into the results
        folder's cells.tar.xz, then writes its tables and figures
check   validates the file and lists its cells, running nothing; loads each cell's datasets and draws its split, and
        fails when a dataset is missing or a split cannot be drawn over the clients (``run`` checks its unfinished
        cells so before running any)
report  writes the tables and figures from the cells finished so far: of an experiment file (its results folder is
        --results-dir, default results/experiments/<name>), of a results folder (its experiment.yaml), or of every
        results folder inside a folder (e.g. measurements/experiments); --check writes nothing and fails, showing
        the difference, where a folder's tables are not what its cells give, byte for byte
pack    moves the finished cells' records of a results folder into its cells.tar.xz (what ``run`` does at its end);
        --drop removes cells from it
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
from collections.abc import Callable
from pathlib import Path

from experiments.cell_archive import ARCHIVE_FILE, CELLS_DIR, ArchiveError, pack, recorded_cells
from experiments.cell_results import CellFileError, unknown_keys
from experiments.class_accuracy import classes_view
from experiments.doc_tables import pages
from experiments.fedfsc_rows import best_accuracies, markdown
from experiments.preflight import cell_problems
from experiments.report import check_tables, finished_results, write_report
from experiments.runner import (
    StaleResultsError,
    cell_run_config,
    default_results_dir,
    run_experiment,
    simulate_cell,
    unfinished_cells,
)
from experiments.spec import Experiment, ExperimentFileError, load_experiment, select_cells
from run_config.defaults import load_defaults
from simulation.batched_cohorts import refusal
from simulation.in_process import run_cell_in_process
from simulation.local_run import add_placement_arguments, exit_on_sigterm

#: A results folder's copy of the experiment file it was run with (the runner writes it).
EXPERIMENT_FILE = "experiment.yaml"


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _experiment_command(args: argparse.Namespace) -> int:
    try:
        experiment = load_experiment(args.file)
    except ExperimentFileError as err:
        _error(str(err))
        return 2
    try:
        selected = select_cells(experiment.cells, tuple(args.only))
    except ValueError as err:
        _error(f"{args.file}: {err}")
        return 2
    results_dir = args.results_dir or default_results_dir(experiment)
    try:
        checked = selected if args.command == "check" else unfinished_cells(selected, results_dir)
    except (ArchiveError, CellFileError) as err:
        _error(str(err))
        return 2
    problems = cell_problems(checked, experiment.clients, results_dir)
    for problem in problems:
        _error(f"{args.file}: {problem}")
    if args.command == "check":
        print(f"{args.file}: {len(selected)} cells, {experiment.clients} clients each; cost: {experiment.cost}")
        for cell in selected:
            print(f"  {cell.name}")
        return 2 if problems else 0
    if problems:
        return 2
    if args.batched_cohorts:
        if not args.in_process:
            _error("--batched-cohorts needs --in-process (simulated clients in one process)")
            return 2
        for cell in selected:
            why = refusal({**load_defaults(), **cell_run_config(cell, results_dir)})
            if why:
                _error(f"{args.file}: cell {cell.name}: {why}")
                return 2
    in_process = functools.partial(run_cell_in_process, batched=args.batched_cohorts)
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
        results = finished_results(experiment, recorded_cells(results_dir))
    except (StaleResultsError, ArchiveError, CellFileError) as err:
        _error(str(err))
        return 2
    for path in write_report(experiment, results, results_dir):
        print(f"wrote {path}")
    return 1 if outcome.failed else 0


def _report_targets(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """(experiment file, results folder) for each target; ``ValueError`` for a target that names neither."""
    if args.results_dir and (len(args.targets) > 1 or args.targets[0].is_dir()):
        raise ValueError("--results-dir goes with one experiment file (a results folder names its own)")
    targets = []
    for target in args.targets:
        if target.is_file():
            targets.append((target, args.results_dir or default_results_dir(load_experiment(target))))
        elif (target / EXPERIMENT_FILE).is_file():
            targets.append((target / EXPERIMENT_FILE, target))
        elif target.is_dir():
            inside = sorted(p.parent for p in target.glob(f"*/{EXPERIMENT_FILE}"))
            if not inside:
                raise ValueError(f"{target}: holds no {EXPERIMENT_FILE}, and no folder inside it does")
            targets += [(folder / EXPERIMENT_FILE, folder) for folder in inside]
        else:
            raise ValueError(f"{target}: no such experiment file or results folder")
    return targets


def _classes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of class numbers") from None


def _pairs(texts: list[str], experiment: Experiment) -> dict[str, str]:
    pairs = dict(text.partition("=")[::2] for text in texts) if texts else dict(experiment.compare)
    for method, baseline in pairs.items():
        for label in (method, baseline):
            if label not in experiment.methods:
                raise ValueError(f"--pair {method}={baseline}: {label!r} is not a method of {experiment.path}")
    return pairs


def _report_one(args: argparse.Namespace, file: Path, results_dir: Path) -> int:
    experiment = load_experiment(file)
    cells = recorded_cells(results_dir)
    if not cells:
        _error(f"{results_dir / ARCHIVE_FILE}: missing, and {results_dir / CELLS_DIR} holds no finished cell")
        return 2
    unreadable = {name: unknown for name, result in cells.items() if (unknown := unknown_keys(result.config))}
    for name, unknown in unreadable.items():
        _error(
            f"{results_dir}: cell {name}: its config.json holds keys that are not run-config keys today, {unknown}: "
            "record it again under today's keys"
        )
    if unreadable:
        return 2
    results = finished_results(experiment, cells)
    views: list[Callable[[], str]] = []
    if args.classes:
        pairs = _pairs(args.pair, experiment)
        views.append(lambda: classes_view(experiment, results, args.classes, pairs))
    if args.fedfsc_rows:
        alphas = [str(a) for a in experiment.grid.get("dirichlet-alpha", ())]
        views.append(lambda: markdown(best_accuracies(cells), alphas))
    if views:
        print("\n\n".join(view() for view in views))
        return 0
    if args.check:
        problems = check_tables(experiment, results, results_dir)
        for problem in problems:
            print(problem)
        if not problems:
            print(f"{results_dir}: every table is what its {len(results)} finished cells give")
        return 1 if problems else 0
    for path in write_report(experiment, results, results_dir, figures=not args.no_figures):
        print(f"wrote {path}")
    return 0


def _report_command(args: argparse.Namespace) -> int:
    try:
        targets = _report_targets(args)
    except (ValueError, ExperimentFileError) as err:
        _error(str(err))
        return 2
    code = 0
    for file, results_dir in targets:
        try:
            code = max(code, _report_one(args, file, results_dir))
        except (ArchiveError, CellFileError, ExperimentFileError, ValueError) as err:  # nothing of it was written
            _error(str(err))
            code = 2
    return code


def _pack_command(args: argparse.Namespace) -> int:
    code = 0
    for folder in args.folders:
        if not folder.is_dir():
            _error(f"{folder}: no such results folder")
            code = 2
            continue
        try:
            path = pack(folder, tuple(args.drop))
        except (ArchiveError, CellFileError) as err:
            _error(str(err))
            code = 2
            continue
        if path is None:
            print(f"{folder}: no finished cell to pack")
        else:
            print(f"{path}: {len(recorded_cells(folder))} cells")
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "check"):
        command = commands.add_parser(name, help=f"{name} an experiment file")
        command.add_argument("file", type=Path, help="experiment file, e.g. experiments/smoke.yaml")
        command.add_argument("--results-dir", type=Path, help="default: results/experiments/<name>")
        command.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="PATTERN",
            help="run or list only the cells whose name matches (shell-style; repeatable)",
        )
        if name == "run":
            add_placement_arguments(command)
            command.add_argument(
                "--in-process",
                action="store_true",
                help="run each cell in this process, clients one after another, without Ray or a SuperLink",
            )
            command.add_argument(
                "--batched-cohorts",
                action="store_true",
                help="with --in-process: train each round's clients as one batched computation (vmap)",
            )
    report = commands.add_parser("report", help="tables and figures from the finished cells")
    report.add_argument(
        "targets", type=Path, nargs="+", metavar="FILE|FOLDER", help="experiment file or results folder(s)"
    )
    report.add_argument(
        "--results-dir", type=Path, help="an experiment file's results folder (default: results/experiments/<name>)"
    )
    report.add_argument(
        "--check", action="store_true", help="write nothing; fail where a table differs from what the cells give"
    )
    report.add_argument("--no-figures", action="store_true", help="write the tables only")
    report.add_argument(
        "--classes",
        type=_classes,
        metavar="C,C,...",
        help="print each cell's accuracy on these classes and on the rest (Table 5.8's view); writes nothing",
    )
    report.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="METHOD=BASELINE",
        help="with --classes: the pairs whose final accuracy on the classes is compared (default: the file's compare)",
    )
    report.add_argument(
        "--fedfsc-rows",
        action="store_true",
        help="print the FedFSC suite in the thesis's rows of Tables 4.5-4.7, gains paired by seed; writes nothing",
    )
    packing = commands.add_parser("pack", help="move the finished cells into the results folder's cells.tar.xz")
    packing.add_argument("folders", type=Path, nargs="+", metavar="FOLDER", help="results folder")
    packing.add_argument(
        "--drop", action="append", default=[], metavar="PATTERN", help="remove the cells whose name matches (repeat)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cka"]:
        from experiments.client_similarity import main as cka_main

        return cka_main(argv[1:])
    if argv[:1] == ["docs"]:
        return pages.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report_command(args)
    if args.command == "pack":
        return _pack_command(args)
    return _experiment_command(args)


if __name__ == "__main__":
    exit_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the running cell recorded its stop (simulation/local_run.py)
        print("stopped (Ctrl-C): `run` again goes on, skipping finished cells and resuming this one", file=sys.stderr)
        sys.exit(130)
