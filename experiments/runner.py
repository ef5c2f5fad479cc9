"""Run an experiment's cells one after another in Flower's simulation engine, resumably.

A cell in the results folder's archive, or whose summary.json says it completed, is finished and skipped; an
interrupted or failed cell goes on from its last round's checkpoint (``resume = true``). Finished cells whose
recorded configuration differs from what the cell would run with today (the file changed, or a default of the app
did) stop the run before anything starts, so a table never mixes settings. The run ends by packing the finished
cells' records into the archive (``experiments/cell_archive.py``), each with the commit of the code that ran it
(``experiments/provenance.py``).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.cell_archive import CELLS_DIR, finished_cell_names, pack, recorded_cells
from experiments.cell_results import config_differences, is_finished, read_rounds, unknown_keys
from experiments.progress import progress_line, seconds_left
from experiments.provenance import checkout_state, record_code
from experiments.spec import Cell, Experiment
from methods.registry import parse_config
from run_config.defaults import load_defaults
from server_app.pretraining import RECIPE_VERSION
from simulation.local_run import Resources, run_simulation

LOGS_DIR = "logs"
POLL_SECONDS = 0.5

#: Runs one cell; returns its exit code. Arguments: run-config overrides, number of clients, the clients'
#: resources, log file. The default starts a private SuperLink (simulation/local_run.py).
RunCell = Callable[[dict, int, Resources, Path], int]


class StaleResultsError(RuntimeError):
    """Finished cells in the results folder were made with other settings than the file now gives."""


def simulate_cell(overrides: dict, clients: int, resources: Resources, log_file: Path) -> int:
    """One ``flwr run`` in simulation, its output in ``log_file``."""
    with log_file.open("ab") as log:
        return run_simulation(overrides, num_supernodes=clients, resources=resources, stream_to=log)


def default_results_dir(experiment: Experiment) -> Path:
    """``results/experiments/<name>`` (git-ignored), relative to the working folder."""
    return Path("results") / "experiments" / experiment.name


class RoundWatcher(threading.Thread):
    """Beside a running cell: calls ``report`` with the rounds recorded so far whenever one more is written."""

    def __init__(self, directory: Path, report: Callable[[list[dict]], None]) -> None:
        super().__init__(daemon=True)
        self.directory, self.report = directory, report
        self.first_round = self.seen = len(read_rounds(directory))
        self._stopped = threading.Event()

    def poll(self) -> None:
        rounds = read_rounds(self.directory)
        if len(rounds) > self.seen:
            self.seen = len(rounds)
            self.report(rounds)

    def run(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            self.poll()

    def stop(self) -> None:
        """Stop watching, after reporting any round written since the last poll."""
        self._stopped.set()
        self.join()
        self.poll()


@dataclass(frozen=True)
class RunOutcome:
    """Which cells this invocation finished, found finished, and saw fail."""

    finished: list[Cell]
    skipped: list[Cell]  # finished by an earlier invocation
    failed: list[Cell]


def cell_run_config(cell: Cell, results_dir: Path) -> dict:
    """The cell's ``--run-config``: its values plus seed, results folder and run name; resumable."""
    return {
        **cell.overrides,
        "seed": cell.seed,
        "results-dir": str((results_dir / CELLS_DIR).resolve()),
        "run-name": cell.name,
        "resume": True,
    }


def pretraining_differences(config: dict, summary: dict) -> list[str]:
    """A cell pretrained by another recipe than this version's starts from other weights: it cannot share a table
    with cells run now. Summaries recorded before the recipe was versioned were made by recipe 1."""
    if config.get("pretrain") not in ("public", "dataset"):
        return []
    version = (summary.get("pretraining") or {}).get("recipe_version", 1)
    return [] if version == RECIPE_VERSION else [f"pretraining recipe: {version} -> {RECIPE_VERSION}"]


#: Settings that say where a run reads and writes, not what it computes: the cells of one folder differ in them.
WHERE_KEYS = frozenset(
    {"results-dir", "run-name", "resume", "data-dir", "data-cache-dir", "pretrain-cache-dir", "feature-cache-dir"}
)
#: Settings that only record more (entropy statistics of clients that select otherwise, computed apart from their
#: training: docs/methods/fedft-eds.md, "Timing"), not what a run trains.
OBSERVING_KEYS = frozenset({"entropy-metrics"})
#: The server's pretraining settings, which a run that does not pretrain (``pretrain = "none"``) never reads.
PRETRAINING_KEYS = frozenset(
    {"pretrain-samples", "pretrain-epochs", "pretrain-batch-size", "pretrain-learning-rate", "pretrain-dataset"}
)
#: The pretraining round's settings, which a run without the round never reads.
ROUND_KEYS = frozenset({"pretrain-round-tolerance", "pretrain-round-max-epochs"})


def unread_settings(recorded: Mapping[str, Any], resolved: Mapping[str, Any]) -> frozenset[str]:
    """The settings that cannot change what a cell computes, given the rest of its config as recorded and as
    resolved today: where it reads and writes, what it only observes, and the pretraining's or the pretraining
    round's settings where neither config pretrains or runs the round."""
    unread = WHERE_KEYS | OBSERVING_KEYS
    if recorded.get("pretrain") == resolved.get("pretrain") == "none":
        unread |= PRETRAINING_KEYS
    if recorded.get("pretrain-round") is False and resolved.get("pretrain-round") is False:
        unread |= ROUND_KEYS
    return unread


def settings_to_match(
    cell: Cell, results_dir: Path, recorded: Mapping[str, Any], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """What a finished cell's config.json must hold for the cell to be the one the file asks for today: every setting
    as the app resolves the cell's run config (``defaults``, the app's, under its values; ``pretrain-round = auto``
    becomes what it means for the method), except those ``unread_settings`` names. A setting the recorded config
    lacks (added to the app since) is compared only where the cell sets it."""
    run = cell_run_config(cell, results_dir)
    resolved = parse_config({**defaults, **run}).to_dict()
    unread = unread_settings(recorded, resolved)
    return {k: v for k, v in resolved.items() if k not in unread and (k in recorded or k in run)}


def check_finished_cells(experiment: Experiment, results_dir: Path) -> None:
    """Raise ``StaleResultsError`` if a finished cell was made with other settings than the cell would run with
    today."""
    recorded, defaults = recorded_cells(results_dir), load_defaults()
    stale = []
    for cell in experiment.cells:
        if cell.name in recorded:
            result = recorded[cell.name]
            if unknown := unknown_keys(result.config):
                stale.append(f"  {cell.name}: its config.json holds keys that are not run-config keys today: {unknown}")
                continue
            wanted = settings_to_match(cell, results_dir, result.config, defaults)
            differences = config_differences(result.config, wanted)
            differences += pretraining_differences(result.config, result.summary)
            if differences:
                stale.append(f"  {cell.name}: {'; '.join(differences)}")
    if stale:
        raise StaleResultsError(
            f"{results_dir} holds finished cells made with other settings than {experiment.path} gives now:\n"
            + "\n".join(stale)
            + f"\ndrop them (python -m experiments pack {results_dir} --drop NAME), or choose another --results-dir"
        )


def unfinished_cells(cells: tuple[Cell, ...], results_dir: Path) -> tuple[Cell, ...]:
    """The cells with no finished run in ``results_dir`` (its archive or its cell folders): those ``run`` runs."""
    finished = finished_cell_names(results_dir)
    return tuple(c for c in cells if c.name not in finished)


def run_experiment(
    experiment: Experiment,
    results_dir: Path,
    run_cell: RunCell = simulate_cell,
    echo: Callable[[str], None] = print,
    cells: tuple[Cell, ...] | None = None,
    gpus_per_client: float = 0.0,
    ray_address: str = "",
) -> RunOutcome:
    """Run every unfinished cell (of ``cells``, default all the file's); print a progress line whenever a round
    finishes; then pack the finished cells into the results folder's archive. Every finished cell of the file is
    checked against it first, since the report covers them all."""
    cells = experiment.cells if cells is None else cells
    resources = Resources(experiment.cpus_per_client, gpus_per_client, ray_address)
    results_dir.mkdir(parents=True, exist_ok=True)
    check_finished_cells(experiment, results_dir)
    shutil.copyfile(experiment.path, results_dir / "experiment.yaml")
    (results_dir / LOGS_DIR).mkdir(exist_ok=True)
    defaults = load_defaults()
    rounds_of = {c: int({**defaults, **c.overrides}["num-server-rounds"]) for c in cells}
    todo = unfinished_cells(cells, results_dir)
    skipped = [c for c in cells if c not in todo]
    if skipped:
        echo(f"{len(skipped)} of {len(cells)} cells already finished in {results_dir}; skipping them")
    rounds_total = sum(rounds_of[c] for c in todo)
    rounds_done, start = 0, time.monotonic()
    code_state = checkout_state()  # the code every cell of this run is computed by
    finished: list[Cell] = []
    failed: list[Cell] = []
    for cell in todo:
        directory = results_dir / CELLS_DIR / cell.name
        log_file = results_dir / LOGS_DIR / f"{cell.name}.log"
        cells_done = len(skipped) + len(finished) + len(failed)

        def report(rounds: list[dict], cell: Cell = cell, cells_done: int = cells_done) -> None:
            elapsed = time.monotonic() - start
            echo(
                progress_line(
                    cells_done=cells_done,
                    cells_total=len(cells),
                    cell=cell.name,
                    server_round=len(rounds),
                    num_rounds=rounds_of[cell],
                    accuracy=rounds[-1].get("accuracy"),
                    elapsed=elapsed,
                    # read while this cell runs, as the loop left them for it
                    left=seconds_left(elapsed, rounds_done + len(rounds) - watcher.first_round, rounds_total),  # noqa: B023
                )
            )

        watcher = RoundWatcher(directory, report)
        rounds_total -= watcher.first_round  # > 0 when an interrupted cell resumes
        watcher.start()
        try:  # the cell runs in this thread, so Ctrl-C or SIGTERM reaches its clean-up (stop by PID)
            exit_code = run_cell(cell_run_config(cell, results_dir), experiment.clients, resources, log_file)
        finally:
            watcher.stop()
        rounds_done += watcher.seen - watcher.first_round
        if exit_code == 0 and is_finished(directory):
            record_code(directory, code_state)
            finished.append(cell)
        else:
            failed.append(cell)
            rounds_total -= rounds_of[cell] - watcher.seen  # the rounds it will not run
            echo(f"{cell.name}: failed (exit code {exit_code}); see {log_file}")
    pack(results_dir)
    return RunOutcome(finished, skipped, failed)
