"""Checkpoints after every round, so a killed server resumes where it stopped (``resume = true``).

A checkpoint holds everything the next rounds depend on: the global model (φ and θ; for FedFSC the base model
it sends), the number of the last finished round, the selection policy's state (FedEntOpt's buffer and random
generator), the strategy's own state (FedFSC's few-shot classifier, a custom-size method's client models) and the
results so far. Everything else a round uses is derived from the seed and the round number (cohorts of random
selection, each client's data selection and SGD order), so a resumed run repeats an uninterrupted one. It is
written to a temporary file and renamed over the old one: a kill mid-write leaves the previous checkpoint intact.
During a run, ``CheckpointWriter`` writes them in a background thread, so the next round does not wait for the disk.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from logging import WARNING
from pathlib import Path
from typing import Any

import torch
from flwr.common.logger import log

from run_config import ConfigError, RunConfig
from server_app.atomic_write import replace_file
from server_app.background import Background
from server_app.torch_files import load_torch_file

CHECKPOINT_FILE = "checkpoint.pt"

#: Keys a resumed run may change: where things live and how long to wait, never what is computed.
#: ``num-server-rounds`` may grow to extend a finished run; ``fail-partitions`` lets an injected fault clear.
CHANGEABLE_ON_RESUME = frozenset(
    {
        "resume",
        "num-server-rounds",
        "round-timeout",
        "node-wait-seconds",
        "client-threads",
        "feature-cache",
        "feature-cache-mb",
        "feature-cache-dir",
        "pretrain-cache-dir",
        "data-dir",
        "data-cache-dir",
        "results-dir",
        "eval-batch-size",
        "fail-partitions",
        "device",
        "server-device",
    }
)


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or does not belong to this run's configuration."""


@dataclass
class Checkpoint:
    """The state of a run after ``server_round``."""

    server_round: int
    model: dict[str, torch.Tensor]  # the full global model: φ and θ
    selection: dict[str, Any]  # the cohort policy's state (empty for stateless random selection)
    results: dict[str, Any]  # RunRecorder.state()
    config: dict[str, Any]  # the run config it was written under
    strategy: dict[str, Any] = field(default_factory=dict)  # the strategy's own state (FedFSC: θ_fs); {} before


class CheckpointWriter:
    """A run's checkpoints written to ``path`` in a background thread, so a round does not wait for the disk.

    ``save`` serialises the checkpoint at once (later changes do not leak in) and waits for the previous write
    (in order, one at a time; a failed write is raised there) before handing the bytes to the thread, which writes
    them atomically (a temporary file, flushed, renamed over ``path``) and then calls ``saved``. ``wait`` waits for
    the write in flight and raises what it raised; ``settle`` waits without raising (a stopping run records the
    rounds of the checkpoint on disk)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writing: Background[None] | None = None

    def save(self, checkpoint: Checkpoint, saved: Callable[[], None]) -> None:
        self.wait()
        buffer = io.BytesIO()
        torch.save(asdict(checkpoint), buffer)
        data = buffer.getvalue()

        def write(_stop: threading.Event) -> None:
            replace_file(self.path, lambda handle: handle.write(data))
            saved()

        self._writing = Background(write, "checkpoint")

    def wait(self) -> None:
        writing = self._writing
        if writing is None:
            return
        try:
            writing.result()
        finally:  # cleared only once it has ended: a wait cut short (Ctrl-C) leaves it for the stop to wait for
            if writing.done():
                self._writing = None

    def settle(self) -> None:
        try:
            self.wait()
        except Exception as err:  # the previous checkpoint stays on disk, and the stop records its rounds
            log(
                WARNING,
                "the last checkpoint could not be written (%s: %s); %s keeps the one before",
                type(err).__name__,
                err,
                self.path,
            )


def load_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint written by ``CheckpointWriter``; raise ``CheckpointError`` if it is unusable."""
    try:
        fields = load_torch_file(path)
        return Checkpoint(**fields)
    except (ValueError, TypeError) as err:
        raise CheckpointError(
            f"checkpoint {path} is unusable ({err}); delete it, or set resume = false to start the run again"
        ) from None


def check_resumable(checkpoint: Checkpoint, config: RunConfig, path: Path) -> None:
    """Refuse to resume under a configuration that would compute something else."""
    current = config.to_dict()
    changed = sorted(k for k in current if k not in CHANGEABLE_ON_RESUME and checkpoint.config.get(k) != current[k])
    if changed:
        diffs = ", ".join(f"'{k}' was {checkpoint.config.get(k)!r}, now {current[k]!r}" for k in changed)
        raise ConfigError(f"run config differs from the checkpoint {path}: {diffs}")
    if checkpoint.server_round > config.num_server_rounds:
        raise ConfigError(
            f"run config 'num-server-rounds' = {config.num_server_rounds} is below the "
            f"{checkpoint.server_round} rounds the checkpoint {path} already holds"
        )


def resume_point(directory: Path, config: RunConfig) -> Checkpoint | None:
    """The checkpoint to go on from: None unless ``resume`` is set and a checkpoint exists."""
    path = directory / CHECKPOINT_FILE
    if not config.resume or not path.exists():
        return None
    checkpoint = load_checkpoint(path)
    check_resumable(checkpoint, config, path)
    return checkpoint
