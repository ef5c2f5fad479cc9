"""FedAvg whose cohorts are chosen by partition id, reproducibly, and whose rounds are observable.

Flower's FedAvg samples transport node ids, which are random per run, and may sample before all nodes
have connected. This subclass overrides only ``configure_train`` / ``configure_evaluate`` (wait for the
population, pick partition ids, address their nodes) and ``aggregate_train`` (report each client's
statistics to an observer, then let FedAvg compute the weighted mean); Flower's ``Strategy.start`` runs
the rounds unchanged. What each client receives goes through one hook, ``records_for``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from strategies.client_population import ClientPopulation
from strategies.label_counts import LabelCountRegistry
from strategies.label_entropy import label_entropy_bits, labels_covered
from strategies.random_selection import cohort_size, select_random

#: (available partition ids, server round) -> the cohort, in selection order
SelectCohort = Callable[[list[int], int], list[int]]
#: server round -> values added to the round's train ConfigRecord (e.g. a decayed learning rate)
RoundConfig = Callable[[int], dict[str, Any]]


class RoundObserver(Protocol):
    """Receives what happens in each round (the results recorder implements it)."""

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None: ...

    def replies_received(self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int) -> None: ...


def client_stats_of(reply: Message) -> dict[str, Any]:
    """A reply's MetricRecord as a dict with snake_case keys (``train-seconds`` -> ``train_seconds``)."""
    return {key.replace("-", "_"): value for key, value in reply.content["metrics"].items()}


def mean_train_loss(contents: list[RecordDict], weight_key: str) -> MetricRecord:
    """Example-weighted mean of the clients' ``train-loss`` (the only metric worth averaging)."""
    weights = [c["metrics"][weight_key] for c in contents]
    losses = [c["metrics"]["train-loss"] for c in contents]
    total = sum(weights)
    return MetricRecord({"train-loss": sum(w * l for w, l in zip(weights, losses)) / total if total else 0.0})


class CohortFedAvg(FedAvg):
    """FedAvg with partition-id cohorts chosen by ``select`` and per-round reports to ``observer``."""

    def __init__(
        self,
        *,
        population: ClientPopulation,
        label_counts: LabelCountRegistry,
        select: SelectCohort,
        observer: RoundObserver,
        round_config: RoundConfig | None = None,
        fraction_evaluate: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=1,
            min_evaluate_nodes=1 if fraction_evaluate > 0 else 0,
            min_available_nodes=1,
            arrayrecord_key="arrays",
            configrecord_key="config",
            train_metrics_aggr_fn=mean_train_loss,
        )
        self.population = population
        self.label_counts = label_counts
        self.select = select
        self.observer = observer
        self.round_config = round_config or (lambda server_round: {})
        self.seed = seed

    def records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        """The array records sent to one client (subclasses add to it)."""
        return {self.arrayrecord_key: arrays}

    def _messages(
        self, cohort: list[int], arrays: ArrayRecord, config: ConfigRecord, message_type: str
    ) -> list[Message]:
        messages = []
        for pid in cohort:
            content = RecordDict({**self.records_for(pid, arrays), self.configrecord_key: config})
            messages.append(Message(content=content, message_type=message_type, dst_node_id=self.population.node_of(pid)))
        return messages

    def available(self, grid: Grid) -> list[int]:
        """Connected clients whose label counts the server holds (new clients are asked first)."""
        connected = self.population.available(grid)
        self.label_counts.collect(grid, {pid: self.population.node_of(pid) for pid in connected})
        return self.label_counts.usable(connected)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Wait for the clients, select a cohort by partition id and send it the arrays."""
        cohort = self.select(self.available(grid), server_round)
        round_config = ConfigRecord({**config, **self.round_config(server_round), "server-round": server_round})
        messages = self._messages(cohort, arrays, round_config, MessageType.TRAIN)
        bytes_down = sum(r.count_bytes() for m in messages for r in m.content.array_records.values())
        cohort_counts = self.label_counts.total(cohort)
        self.observer.round_started(
            server_round,
            cohort,
            bytes_down,
            cohort_label_entropy=float(label_entropy_bits(cohort_counts)),
            cohort_labels_covered=labels_covered(cohort_counts),
            learning_rate=float(round_config["learning-rate"]) if "learning-rate" in round_config else None,
        )
        return messages

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Federated evaluation on a seeded random ``fraction_evaluate`` of the clients (none at 0)."""
        if self.fraction_evaluate == 0.0:
            return []
        available = self.available(grid)
        size = cohort_size(len(available), self.fraction_evaluate)
        cohort = select_random(available, size, self.seed + 1, server_round)
        round_config = ConfigRecord({**config, "server-round": server_round})
        return self._messages(cohort, arrays, round_config, MessageType.EVALUATE)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Report the clients' statistics, then aggregate with FedAvg's weighted mean.

        Replies are put in partition-id order first: float sums depend on the order of their terms, and
        arrival order varies from run to run.
        """
        partition = self.population.partition_of
        replies = sorted(replies, key=lambda r: partition.get(r.metadata.src_node_id, -1))
        ok = [r for r in replies if not r.has_error()]
        self.observer.replies_received(
            server_round,
            [client_stats_of(r) for r in ok],
            sum(r.content[self.arrayrecord_key].count_bytes() for r in ok),
        )
        return super().aggregate_train(server_round, replies)
