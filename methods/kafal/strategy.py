"""KAFAL's server step (Alg. 1): FedAvg over the clients' labelled pools, in cycles that end in a query.

``ActiveLearningFedAvg`` is ``CohortFedAvg`` (partition-id cohorts, stragglers, checked replies, the aggregation
rules) with the active-learning schedule added:

- each cycle starts from the initial global model Ω⁰ when ``kafal.al-reinitialise`` (Alg. 1 line 3 and the authors'
  code), until a round of the cycle has aggregated;
- every ``train`` request says its cycle and round within it (Alg. 2: no compensation in a cycle's first round);
- each reply's ``num-examples`` must be exactly the labelled pool the server expects of that client
  (⌈f₀·n⌉ + queries·⌈b·n⌉), the FedAvg weight of Eq. 7;
- after a cycle's last round (but the final cycle's) every connected client gets a ``query.al_query`` carrying the
  cycle's final global model; each reply is read by ``read_al_query_reply`` (``methods/kafal/records.py``) and the
  cycle is reported (``report_cycle``: a row of cycles.jsonl, ``methods/kafal/results.py``). A client whose query
  failed or was refused is named there, and its pool size is unknown from then on (its later ``num-examples`` are
  only bounded by what it holds);
- label counts are never asked for: a KAFAL client knows only its labelled pool.

``cycle_cohorts`` makes every cycle's last round train every client when ``kafal.al-final-round-all`` (the authors'
code), so each client's local model is from the round the final global model aggregated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from methods.kafal.pools import initial_labelled_size, query_budget
from methods.kafal.records import AL_CYCLE, AL_QUERY, AL_TRAIN_METRICS, read_al_query_reply
from methods.kafal.schedule import CycleSchedule
from protocol.messages import ARRAYS, CONFIG, SERVER_ROUND
from protocol.replies import read_train_reply, refusal
from server_app.result_files import Row
from strategies.client_errors import error_summary
from strategies.cohort_fedavg import CohortFedAvg, SelectCohort


def cycle_cohorts(schedule: CycleSchedule, select: SelectCohort, final_round_all: bool) -> SelectCohort:
    """``select``, except that a cycle's last round takes every available client when ``final_round_all``."""

    def cohort(available: list[int], server_round: int) -> list[int]:
        if final_round_all and schedule.ends_cycle(server_round):
            return sorted(available)
        return select(available, server_round)

    return cohort


def record_bytes(content: RecordDict) -> int:
    """Bytes of every record of a message's content."""
    return sum(record.count_bytes() for record in content.values())


class ActiveLearningFedAvg(CohortFedAvg):
    """CohortFedAvg in active-learning cycles: re-initialisation, exact labelled-pool weights, end-of-cycle queries."""

    reply_metrics = AL_TRAIN_METRICS

    def __init__(
        self,
        *,
        schedule: CycleSchedule,
        initial_arrays: ArrayRecord,
        reinitialise: bool,
        initial_fraction: float,
        budget_fraction: float,
        num_classes: int,
        query_timeout: float,
        report_cycle: Callable[[Row], None],
        **kwargs: Any,
    ) -> None:
        """``report_cycle`` takes each finished cycle's fields (the recorder writes them to cycles.jsonl with the
        accuracy of the cycle's last round)."""
        super().__init__(**kwargs)
        self.report_cycle = report_cycle
        self.schedule = schedule
        self.initial_arrays = initial_arrays
        self.reinitialise = reinitialise
        self.initial_fraction = initial_fraction
        self.budget_fraction = budget_fraction
        self.num_classes = num_classes
        self.query_timeout = query_timeout
        self.labelled: dict[int, int | None] = {}  # partition id -> labelled pool (None: unknown after a failure)
        self.counts: dict[int, np.ndarray] = {}  # partition id -> labelled pool per class, from its last query
        self._aggregated_cycle = -1  # the last cycle in which a round aggregated

    def available(self, grid: Grid) -> list[int]:
        """Connected clients; no label counts are asked for (a client knows only its labelled pool)."""
        return self.population.available(grid)

    def expected_labelled(self, partition_id: int) -> int | None:
        """The labelled pool the server expects the client to train on (None: unknown)."""
        if partition_id not in self.labelled:
            num_local = self.population.identity_of(partition_id).num_examples
            self.labelled[partition_id] = initial_labelled_size(num_local, self.initial_fraction)
        return self.labelled[partition_id]

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Send Ω⁰ in a new cycle until one of its rounds aggregates (``kafal.al-reinitialise``), else the global
        model."""
        cycle = self.schedule.cycle_of(server_round)
        if self.reinitialise and cycle > self._aggregated_cycle:
            arrays = self.initial_arrays
        return super().configure_round(server_round, arrays, config, grid)

    def aggregate_round(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        arrays, metrics = super().aggregate_round(server_round, replies)
        if arrays is not None:
            self._aggregated_cycle = self.schedule.cycle_of(server_round)
        return arrays, metrics

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """The protocol's checks, with ``num-examples`` = the labelled pool the server expects of this client (not
        the run's ``expected_examples``, the whole local data: a KAFAL client trains on its labelled pool)."""
        read_train_reply(
            content,
            self._expected_from[partition_id],
            self.population.identity_of(partition_id),
            self.expected_labelled(partition_id),
            self.reply_metrics,
            self.reply_records,
        )

    def configure_evaluation(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """After a cycle's last round (Flower calls this right after aggregation, with the new global model): the
        clients query, and the cycle is reported; then federated evaluation as configured."""
        if self.schedule.ends_cycle(server_round):
            self.end_cycle(server_round, arrays, grid)
        return super().configure_evaluation(server_round, arrays, config, grid)

    def labelled_totals(self, partition_ids: Iterable[int]) -> tuple[int, int]:
        """(labelled, held) summed over the clients whose labelled pool the server knows."""
        labelled = held = 0
        for pid in partition_ids:
            pool = self.expected_labelled(pid)
            if pool is not None:
                labelled += pool
                held += self.population.identity_of(pid).num_examples
        return labelled, held

    def end_cycle(self, server_round: int, arrays: ArrayRecord, grid: Grid) -> None:
        """Query every connected client (unless the cycle is the last) and report the cycle."""
        cycle = self.schedule.cycle_of(server_round)
        clients = self.population.available(grid)
        labelled, held = self.labelled_totals(clients)
        fields: dict[str, Any] = {
            "cycle": cycle,
            "rounds": list(self.schedule.rounds_of(cycle)),
            "trained_labelled_fraction": labelled / held if held else None,
            "restarts": self.reinitialise,  # the next cycle starts from Ω⁰ (its rounds are compared afresh)
        }
        if self.schedule.queries_after(server_round):
            fields.update(self.query(server_round, cycle, arrays, grid, clients))
            labelled, held = self.labelled_totals(clients)
        else:
            fields.update(queried={}, query_seconds=0.0, query_seconds_max=0.0, query_wall_seconds=0.0)
        fields.update(
            labelled_fraction=labelled / held if held else None,
            labelled=labelled,
            held=held,
            labelled_counts={str(pid): self.counts[pid].tolist() for pid in sorted(self.counts)},
        )
        self.report_cycle(fields)

    def query(
        self, server_round: int, cycle: int, arrays: ArrayRecord, grid: Grid, clients: list[int]
    ) -> dict[str, Any]:
        """Send the final global model with a ``query.al_query`` to ``clients``; read and record their replies."""
        config = ConfigRecord({SERVER_ROUND: server_round, AL_CYCLE: cycle})
        messages = [
            Message(
                RecordDict({ARRAYS: arrays, CONFIG: config}),
                message_type=AL_QUERY,
                dst_node_id=self.population.node_of(pid),
            )
            for pid in clients
        ]
        bytes_down = sum(record_bytes(m.content) for m in messages)
        tick = time.perf_counter()
        replies = list(grid.send_and_receive(messages, timeout=self.query_timeout))
        wall_seconds = time.perf_counter() - tick
        queried: dict[str, int] = {}
        seconds: list[float] = []
        problems: dict[int, str] = {}
        for pid, reply in self._senders(replies, clients):
            problem = self.read_query(pid, reply, queried, seconds)
            if problem:
                problems[pid] = problem
        for pid in clients:
            if str(pid) not in queried and pid not in problems:
                problems[pid] = "no reply within the query timeout"
        for pid, problem in problems.items():
            self.labelled[pid] = None
            log(WARNING, "cycle %d: the query of client %d %s", cycle, pid, problem)
        log(
            INFO,
            "cycle %d: %d clients queried %d samples (%.1f s)",
            cycle,
            len(queried),
            sum(queried.values()),
            wall_seconds,
        )
        return {
            "queried": queried,
            "query_seconds": sum(seconds),
            "query_seconds_max": max(seconds, default=0.0),
            "query_wall_seconds": wall_seconds,
            "query_bytes_down": bytes_down,
            "query_bytes_up": sum(record_bytes(r.content) for r in replies if not r.has_error()),
            "query_problems": [{"partition_id": pid, "reason": why} for pid, why in sorted(problems.items())],
        }

    def read_query(self, pid: int, reply: Message, queried: dict[str, int], seconds: list[float]) -> str | None:
        """Check one query reply; keep what it says, or return why it is refused."""
        if reply.has_error():
            return f"failed: {error_summary(reply.error.reason or '')}"
        identity = self.population.identity_of(pid)
        report, reason = refusal(
            read_al_query_reply,
            reply.content,
            identity,
            self.num_classes,
            query_budget(identity.num_examples, self.budget_fraction),
            self.expected_labelled(pid),
            self.counts.get(pid),
        )
        if report is None:
            return f"was refused: {reason}"
        self.labelled[pid] = report.num_labelled
        self.counts[pid] = report.counts
        queried[str(pid)] = report.num_queried
        seconds.append(report.query_seconds)
        return None


def merge_round_config(*parts: Callable[[int], Mapping[str, Any]]) -> Callable[[int], dict[str, Any]]:
    """One round-config function from several (later ones win on a shared key)."""
    return lambda server_round: {k: v for part in parts for k, v in part(server_round).items()}
