"""The ServerApp: a federated run in three steps (server_app/lifecycle.py tells the story)."""

from __future__ import annotations

from contextlib import ExitStack

import torch
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from methods.registry import CATALOGUE, METHODS, generic_dataset
from profiling.spans import SERVER, span
from server_app.lifecycle import FederatedRun, RunMethods
from server_app.run_errors import RunError, hide_tracebacks_of
from server_app.timed_grid import TimedGrid
from simulation.dead_actors import guard_if_simulated
from simulation.message_index import index_by_destination

torch.set_flush_denormal(True)  # a freshly initialised model computes with denormal floats, about 2x slower on CPU

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Start the run, run its rounds, finish it (``[tool.flwr.app.config]`` and ``--run-config`` configure it)."""
    hide_tracebacks_of(RunError)
    index_by_destination(getattr(grid, "state", None))  # in simulation: message hand-out independent of population
    grid = TimedGrid(guard_if_simulated(grid))  # type: ignore[assignment]
    with span(SERVER), ExitStack() as held:  # holds the run folder's lock until the run ends
        run = FederatedRun.start(grid, context, held, RunMethods(CATALOGUE, METHODS, generic_dataset))
        run.finish(run.rounds(grid))
