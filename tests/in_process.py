"""The real ServerApp and ClientApp in one process, without Ray or a SuperLink.

``InProcessGrid`` answers each message by calling the ClientApp's handler for that message type with the
node's own ``Context``, the way a SuperNode does: an exception becomes an error reply, and a reply that
took longer than the round's timeout is dropped, like one arriving after Flower stopped waiting. It
lets tests drive whole runs (faults, resume, reproducibility) in seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from flwr.app import Context, Error, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.exit.exit_handler import trigger_exit_handlers

import client_app.app as client
import server_app.app as server
from protocol.messages import CONFIG, IDENTIFY, SERVER_ROUND, TRAIN
from run_config.defaults import load_defaults
from tests.fake_grid import FakeGrid

HANDLERS = client.HANDLERS


def flower_stop() -> None:
    """Run Flower's exit handlers as its SIGINT handler does (those run before its force-exit, then the rest),
    without ending the process."""
    trigger_exit_handlers(run_before_force_exit=True)
    trigger_exit_handlers(run_before_force_exit=False)


class ServerKilled(RuntimeError):
    """Stands for the server process dying (raised by the grid when told to)."""


class InProcessGrid(FakeGrid):
    """Nodes 101, 102, … holding partitions 0, 1, …; ``kill_at_round`` dies when that round's training starts;
    ``stop_at_round`` runs Flower's exit handlers there, as its SIGINT handler does, and answers on;
    ``stop_at_start`` runs them at the clients' identity query (the run is starting: pretraining) and then dies, as
    the engine's process ends after them."""

    def __init__(
        self,
        run_config: dict[str, Any],
        num_partitions: int,
        kill_at_round: int | None = None,
        stop_at_round: int | None = None,
        stop_at_start: bool = False,
    ) -> None:
        self.contexts = {
            101 + pid: Context(
                run_id=1,
                node_id=101 + pid,
                node_config={"partition-id": pid, "num-partitions": num_partitions},
                state=RecordDict(),
                run_config=run_config,
            )
            for pid in range(num_partitions)
        }
        super().__init__(self.contexts, {message_type: self._answer for message_type in HANDLERS})
        self.kill_at_round = kill_at_round
        self.stop_at_round = stop_at_round
        self.stop_at_start = stop_at_start

    def _answer(self, msg: Message) -> Message:
        if msg.metadata.message_type == IDENTIFY and self.stop_at_start:
            flower_stop()
            raise ServerKilled("stopped while the run was starting")
        if msg.metadata.message_type == TRAIN and msg.content[CONFIG][SERVER_ROUND] == self.kill_at_round:
            raise ServerKilled(f"killed at the start of round {self.kill_at_round}")
        if msg.metadata.message_type == TRAIN and msg.content[CONFIG][SERVER_ROUND] == self.stop_at_round:
            self.stop_at_round = None
            flower_stop()
        try:
            return HANDLERS[msg.metadata.message_type](msg, self.contexts[msg.metadata.dst_node_id])
        except Exception as err:  # what Flower's ClientApp runner does with a handler's exception
            return Message(Error(code=1, reason=f"{type(err).__name__}: {err}"), reply_to=msg)


def small_run_config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """A FedFT-EDS run on the synthetic dataset with LeNet-5, small enough for seconds per round."""
    config = load_defaults()
    config.update(
        {
            "dataset": "synthetic",
            "model": "lenet5",
            "pretrain-epochs": 2,
            "pretrain-samples": 600,  # of the default pretraining source (MNIST): seconds, not a minute, for a WRN
            "num-server-rounds": 3,
            "local-epochs": 1,
            "batch-size": 32,
            "dirichlet-alpha": 0.5,
            "min-partition-size": 5,
            "results-dir": str(tmp_path / "results"),
            "run-name": "run",
            "node-wait-seconds": 0.0,
            "pretrain-cache-dir": str(tmp_path / "pretrained"),
            "feature-cache-dir": str(tmp_path / "features"),
            "client-threads": 1,
            # the pretraining round (a method's preset) is tested on its own (tests/test_pretraining_round_server.py);
            # the rest of the suite's small runs start from the server's pretraining alone
            "pretrain-round": False,
        }
    )
    config.update(overrides)
    return config


def run_in_process(
    run_config: dict[str, Any],
    num_partitions: int = 4,
    kill_at_round: int | None = None,
    stop_at_round: int | None = None,
    stop_at_start: bool = False,
) -> InProcessGrid:
    """Run the ServerApp's main to the end (or until killed) against in-process clients."""
    grid = InProcessGrid(run_config, num_partitions, kill_at_round, stop_at_round, stop_at_start)
    threads = torch.get_num_threads()  # the client sets its thread count; keep it from leaking into other tests
    try:
        server.main(
            cast(Grid, grid), Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)
        )
    finally:
        torch.set_num_threads(threads)
    return grid
