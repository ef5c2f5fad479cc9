"""Batched cohorts for the in-process engine (``simulation/in_process.py``, the experiment runner's
``--batched-cohorts``): a round's clients train as one computation.

Each train message of a round is answered by the ClientApp's own handler on its own thread, so every client does its
usual work (data, decoding, selection, the reply and its checks); when a client reaches its local SGD epochs it hands
them to the round's ``CohortRendezvous`` instead of training alone. When every client of the round has either handed
its epochs in or finished without training, the last to arrive trains them all with ``models.cohort_training``
(``vmap`` over their stacked parameters) and each client goes on with its own trained parameters.

It covers the methods that train on the shared client step with the plain cross-entropy (``covered_methods``): a
method with its own client step or another objective is refused before the run starts (``refusal``). Each client
reports as its training seconds its own work plus an equal share of the cohort's computation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import torch

from client_app.epoch_training import EpochsDone
from client_app.objective import CrossEntropy, Objective
from methods.registry import METHODS, parse_config
from models.cohort_training import ClientJob, CohortError, train_cohort


def covered_methods() -> list[str]:
    """The methods whose clients train on the shared step with the plain cross-entropy by default."""
    return [
        name
        for name, method in METHODS.items()
        if method.client_train is None and method.presets.get("objective", "plain") == "plain"
    ]


def refusal(run_config: Mapping[str, Any]) -> str | None:
    """Why ``run_config``'s run cannot train its cohorts batched, in one line naming the method; None if it can."""
    config = parse_config(run_config)
    if METHODS[config.method].client_train is not None:
        return (
            f"--batched-cohorts: method {config.method!r} trains its clients with its own step; batched cohorts "
            f"cover the methods on the shared step with the plain objective: {', '.join(covered_methods())}"
        )
    if config.objective != "plain":
        return (
            f"--batched-cohorts: method {config.method!r} trains with objective {config.objective!r}; batched "
            "cohorts cover the plain cross-entropy only"
        )
    return None


class CohortRendezvous:
    """Where the clients of one round meet with their epochs; the last to arrive trains them all together.

    ``expected`` clients take part, each through its own ``Seat``: it either hands in its epochs (``Seat.train``, an
    ``EpochTrainer``) or, finishing without training (an error, a fault), is let go (``Seat.leave``).
    """

    def __init__(self, expected: int) -> None:
        self._expected = expected
        self._condition = threading.Condition()
        self._seats = 0
        self._jobs: dict[int, ClientJob] = {}  # by seat
        self._left: set[int] = set()
        self._losses: dict[int, float] = {}
        self._seconds = 0.0
        self._error: BaseException | None = None
        self._started = False
        self._done = False

    def seat(self) -> Seat:
        """A place for one more client."""
        with self._condition:
            self._seats += 1
            if self._seats > self._expected:
                raise RuntimeError(f"a cohort of {self._expected} clients has no seat for another")
            return Seat(self, self._seats)

    def _train(self, seat: int, job: ClientJob, objective: Objective) -> EpochsDone:
        arrived = time.perf_counter()
        with self._condition:
            if type(objective) is not CrossEntropy:
                self._left.add(seat)
                self._start_if_complete()
                raise CohortError(f"client {job.client}: batched cohorts train the plain cross-entropy only")
            self._jobs[seat] = job
            self._start_if_complete()
            self._condition.wait_for(lambda: self._done)
            if self._error is not None:
                raise CohortError(f"the cohort's training failed: {self._error}") from self._error
            loss, share = self._losses[seat], self._seconds / len(self._jobs)
        return EpochsDone(loss, max(time.perf_counter() - arrived - share, 0.0))

    def _leave(self, seat: int) -> None:
        with self._condition:
            if seat not in self._jobs:
                self._left.add(seat)
                self._start_if_complete()

    def _start_if_complete(self) -> None:
        """Train the cohort once every client has arrived or left (called holding the condition's lock)."""
        if self._started or len(self._jobs) + len(self._left) < self._expected:
            return
        self._started = True
        tick = time.perf_counter()
        try:
            if self._jobs:
                order = sorted(self._jobs, key=lambda seat: self._jobs[seat].client)
                jobs = [self._jobs[seat] for seat in order]
                torch.manual_seed(jobs[0].generator.initial_seed())  # dropout masks, whatever the threads' order
                self._losses = dict(zip(order, train_cohort(jobs), strict=True))
        except Exception as err:  # every client of the cohort replies with the error
            self._error = err
        self._seconds = time.perf_counter() - tick
        self._done = True
        self._condition.notify_all()


class Seat:
    """One client's place in a round's cohort."""

    def __init__(self, rendezvous: CohortRendezvous, number: int) -> None:
        self._rendezvous = rendezvous
        self._number = number

    def train(self, job: ClientJob, objective: Objective) -> EpochsDone:
        """Hand in this client's epochs and wait for the cohort to train them (an ``EpochTrainer``)."""
        return self._rendezvous._train(self._number, job, objective)

    def leave(self) -> None:
        """This client is done; a no-op if it handed in epochs."""
        self._rendezvous._leave(self._number)
