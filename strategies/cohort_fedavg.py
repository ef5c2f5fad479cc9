"""FedAvg whose cohorts are chosen by partition id, reproducibly, and whose rounds are observable.

Flower's FedAvg samples transport node ids, which are random per run, and may sample before all nodes
have connected. This subclass overrides Flower's four hooks once (``@final``): each converts Flower's round number
into the run's (a resumed run numbers its rounds on from ``first_round``) and hands it to the hook a method
overrides: ``configure_round`` / ``configure_evaluation`` (wait for the population, pick partition ids, address
their nodes), ``aggregate_round`` (sort the replies into accepted, failed, rejected and timed out, aggregate the
accepted ones under the ``aggregation`` rule (``strategies/robust_aggregation.py``; ``mean`` is Flower's FedAvg mean
unchanged) and report it all to an observer) and ``aggregate_evaluation``; Flower's ``Strategy.start`` runs the
rounds unchanged. What each client receives goes through hooks: ``records_for`` (its arrays), ``train_records_for``
(a training message's arrays: a method with per-client models sends each client its own), ``config_for`` (its
config: a straggler's shortened epochs) and ``train_content`` (the whole training message: a method may give each
client other work). A method whose global model is not the arrays it sends (FedFSC) overrides ``global_arrays``,
records further evaluations with ``round_evaluation`` and keeps its own state through
``state_dict``/``load_state_dict`` (checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from logging import WARNING
from typing import TYPE_CHECKING, Any, Protocol, final

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from profiling.spans import AGGREGATION, DECODE, ENCODE, LABEL_COUNTS, SAMPLING, span
from protocol.messages import (
    ARRAYS,
    CONFIG,
    EVAL_ACCURACY,
    EVAL_LOSS,
    EVALUATE,
    LEARNING_RATE,
    LOCAL_EPOCHS,
    METRICS,
    NUM_EXAMPLES,
    SERVER_ROUND,
    TRAIN,
    TRAIN_LOSS,
    TRAIN_METRICS,
    Number,
)
from protocol.replies import ArraySpec, array_specs, read_evaluate_reply, read_train_reply, refusal
from strategies.client_errors import error_summary
from strategies.client_population import ClientPopulation
from strategies.label_counts import LabelCountRegistry
from strategies.label_entropy import label_entropy_bits, labels_covered
from strategies.random_selection import cohort_size, select_random
from strategies.robust_aggregation import (
    DEFAULT_AGGREGATION,
    MEAN,
    AggregationSettings,
    conform_to,
    min_clients,
    robust_aggregate,
)
from strategies.stragglers import partial_epochs, round_stragglers

if TYPE_CHECKING:
    from strategies.central_evaluation import CentralEvaluation

#: (available partition ids, server round) -> the cohort, in selection order
SelectCohort = Callable[[list[int], int], list[int]]
#: server round -> values added to the round's train ConfigRecord (e.g. a decayed learning rate)
RoundConfig = Callable[[int], dict[str, Any]]
#: samples a client holds -> how many of them the method trains on (None: any number up to all of them)
ExpectedExamples = Callable[[int], int | None]


class RoundObserver(Protocol):
    """Receives what happens in each round (the results recorder implements it)."""

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None: ...

    def replies_received(
        self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int, **fields: Any
    ) -> None: ...

    def evaluations_received(self, server_round: int, **fields: Any) -> None: ...


@dataclass
class RoundReplies:
    """A training round's replies sorted by what happened to each selected client."""

    accepted: dict[int, Message] = field(default_factory=dict)  # partition id -> reply, in partition-id order
    failed: dict[int, str] = field(default_factory=dict)  # partition id -> the client's error
    rejected: dict[int, str] = field(default_factory=dict)  # partition id -> why the update was refused
    timed_out: list[int] = field(default_factory=list)  # selected, but no reply within round-timeout

    def problems(self) -> dict[str, Any]:
        """The per-round fields of rounds.jsonl that name who did not count, and why."""
        return {"failed": _reasons(self.failed), "rejected": _reasons(self.rejected), "timed_out": self.timed_out}


def _reasons(by_partition: dict[int, str]) -> list[dict[str, Any]]:
    return [{"partition_id": pid, "reason": reason} for pid, reason in sorted(by_partition.items())]


def client_stats_of(reply: Message) -> dict[str, Any]:
    """A validated reply's numbers as a dict with snake_case keys (``train-seconds`` -> ``train_seconds``): its
    metrics, then those of any further metric record a method declares (FedFSC's few-shot numbers)."""
    records = [reply.content[METRICS]] + [r for k, r in reply.content.metric_records.items() if k != METRICS]
    return {key.replace("-", "_"): value for record in records for key, value in record.items()}


def weighted_means(metrics: Sequence[Mapping[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """Example-weighted means of ``keys`` over validated metrics (``num-examples`` ≥ 1 in each)."""
    total = sum(m[NUM_EXAMPLES] for m in metrics)
    return {key: sum(m[NUM_EXAMPLES] * m[key] for m in metrics) / total for key in keys} if total else {}


def mean_train_loss(contents: list[RecordDict], weight_key: str) -> MetricRecord:
    """Example-weighted mean of the accepted clients' ``train-loss`` (the only training metric worth averaging)."""
    return MetricRecord(weighted_means([c.metric_records[METRICS] for c in contents], [TRAIN_LOSS]))


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
        min_train_nodes: int = 1,
        straggler_fraction: float = 0.0,
        straggler_mode: str = "redraw",
        straggler_work: str = "none",
        local_epochs: int = 1,
        seed: int = 0,
        aggregation: AggregationSettings = DEFAULT_AGGREGATION,
        expected_examples: ExpectedExamples = lambda num_local: None,
        first_round: int = 1,
    ) -> None:
        super().__init__(
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=min_train_nodes,
            min_evaluate_nodes=1 if fraction_evaluate > 0 else 0,
            min_available_nodes=1,
            arrayrecord_key=ARRAYS,
            configrecord_key=CONFIG,
            train_metrics_aggr_fn=mean_train_loss,
        )
        self.population = population
        self.label_counts = label_counts
        self.select = select
        self.observer = observer
        self.round_config = round_config or (lambda server_round: {})
        self.seed = seed
        self.straggler_fraction = straggler_fraction
        self.straggler_mode, self.straggler_work, self.local_epochs = straggler_mode, straggler_work, local_epochs
        self._epochs_of: dict[int, int] = {}  # partition id -> shortened epochs this round (partial-work stragglers)
        self.aggregation = aggregation
        self.expected_examples = expected_examples
        self.first_round = first_round  # the run's number for Flower's round 1 (a resumed run goes on)
        self._cohort: list[int] = []
        self._evaluated: list[int] = []
        self._expected: dict[str, ArraySpec] = {}  # shapes and dtypes of the round's global θ
        self._expected_from: dict[int, dict[str, ArraySpec]] = {}  # partition id -> what its reply's θ must match
        self._sent = ArrayRecord()  # the round's global arrays, from which updates are measured

    def records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        """The array records sent to one client (subclasses add to it)."""
        return {self.arrayrecord_key: arrays}

    def train_records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        """The array records of one client's training message (a method with per-client models sends its own)."""
        return self.records_for(partition_id, arrays)

    def config_for(self, partition_id: int, config: ConfigRecord) -> ConfigRecord:
        """The config sent to one client (subclasses add to it): the round's, with a partial-work straggler's
        epochs."""
        if partition_id in self._epochs_of:
            return ConfigRecord({**config, LOCAL_EPOCHS: self._epochs_of[partition_id]})
        return config

    def train_content(self, partition_id: int, arrays: ArrayRecord, config: ConfigRecord) -> RecordDict:
        """What one client's training message holds: its array records and its config (a method that gives
        clients different work changes it)."""
        return RecordDict(
            {
                **self.train_records_for(partition_id, arrays),
                self.configrecord_key: self.config_for(partition_id, config),
            }
        )

    def _messages(
        self, cohort: list[int], arrays: ArrayRecord, config: ConfigRecord, message_type: str
    ) -> list[Message]:
        messages = []
        for pid in cohort:
            content = (
                self.train_content(pid, arrays, config)
                if message_type == TRAIN
                else RecordDict({**self.records_for(pid, arrays), self.configrecord_key: config})
            )
            messages.append(
                Message(content=content, message_type=message_type, dst_node_id=self.population.node_of(pid))
            )
        return messages

    def available(self, grid: Grid) -> list[int]:
        """Connected clients whose label counts the server holds (new clients are asked first)."""
        connected = self.population.available(grid)
        with span(LABEL_COUNTS):
            self.label_counts.collect(
                grid,
                {pid: self.population.node_of(pid) for pid in connected},
                {pid: self.population.identity_of(pid) for pid in connected},
                self.population.offered_counts,
            )
        return self.label_counts.usable(connected)

    def run_round(self, flower_round: int) -> int:
        """The run's round number of Flower's ``flower_round``: a resumed run's Flower rounds restart at 1, the run's
        go on from its checkpoint. Flower's four hooks convert it here, once, and hand the run's round to the hooks
        a method overrides (``configure_round``, ``aggregate_round``, ``configure_evaluation``,
        ``aggregate_evaluation``)."""
        return flower_round + self.first_round - 1

    @final
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Flower's hook: ``configure_round`` with the run's round number."""
        return self.configure_round(self.run_round(server_round), arrays, config, grid)

    @final
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Flower's hook: ``aggregate_round`` with the run's round number."""
        return self.aggregate_round(self.run_round(server_round), replies)

    @final
    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Flower's hook: ``configure_evaluation`` with the run's round number."""
        return self.configure_evaluation(self.run_round(server_round), arrays, config, grid)

    @final
    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Flower's hook: ``aggregate_evaluation`` with the run's round number."""
        return self.aggregate_evaluation(self.run_round(server_round), replies)

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Round ``server_round`` of the run: wait for the clients, select a cohort by partition id and send the
        arrays to those of it that do not drop out this round (``straggler_fraction``; stragglers doing partial
        work get fewer epochs)."""
        with span(SAMPLING, round=server_round):
            selected = self.select(self.available(grid), server_round)
            slow = round_stragglers(
                selected,
                self.straggler_fraction,
                self.straggler_mode,
                self.seed,
                server_round,
                self.population.expected,
            )
            partial = self.straggler_work == "partial"
            dropped = [] if partial else slow
            self._epochs_of = (
                {pid: partial_epochs(self.local_epochs, self.seed, server_round, pid) for pid in slow}
                if partial
                else {}
            )
        with span(ENCODE, round=server_round):
            return self._round_messages(server_round, selected, dropped, arrays, config)

    def _round_messages(
        self, server_round: int, selected: list[int], dropped: list[int], arrays: ArrayRecord, config: ConfigRecord
    ) -> list[Message]:
        cohort = [pid for pid in selected if pid not in dropped]
        return self.send_work(server_round, cohort, arrays, config, dropped=dropped)

    def send_work(
        self, server_round: int, cohort: list[int], arrays: ArrayRecord, config: ConfigRecord, **fields: Any
    ) -> list[Message]:
        """The round's training messages to ``cohort`` (the run's round number ``server_round``); reports the
        round's start to the observer with ``fields`` (who dropped out, who does what)."""
        self._cohort, self._expected, self._sent = cohort, array_specs(arrays), arrays
        round_config = ConfigRecord({**config, **self.round_config(server_round), SERVER_ROUND: server_round})
        messages = self._messages(cohort, arrays, round_config, TRAIN)
        # A reply's θ must match the θ its client was sent (methods with per-client models send different ones).
        self._expected_from = {pid: array_specs(m.content.array_records[ARRAYS]) for pid, m in zip(cohort, messages)}
        bytes_down = sum(r.count_bytes() for m in messages for r in m.content.array_records.values())
        cohort_counts = self.label_counts.total(cohort)
        self.observer.round_started(
            server_round,
            cohort,
            bytes_down,
            cohort_label_entropy=float(label_entropy_bits(cohort_counts)),
            cohort_labels_covered=labels_covered(cohort_counts),
            learning_rate=float(round_config[LEARNING_RATE]) if LEARNING_RATE in round_config else None,  # type: ignore[arg-type]
            **fields,
            **({"partial_epochs": {str(pid): e for pid, e in self._epochs_of.items()}} if self._epochs_of else {}),
        )
        return messages

    def configure_evaluation(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Federated evaluation in the run's round ``server_round`` on a seeded random ``fraction_evaluate`` of the
        clients (none at 0)."""
        if self.fraction_evaluate == 0.0:
            return []
        available = self.available(grid)
        size = cohort_size(len(available), self.fraction_evaluate)
        cohort = select_random(available, size, self.seed + 1, server_round)
        self._evaluated = cohort
        round_config = ConfigRecord({**config, SERVER_ROUND: server_round})
        return self._messages(cohort, arrays, round_config, EVALUATE)

    def _senders(self, replies: Iterable[Message], addressed: list[int]) -> list[tuple[int, Message]]:
        """(partition id, reply) for the replies from clients this round addressed, in partition-id order; one reply
        per client (a node answering twice, or for another, is ignored)."""
        partition, seen, senders = self.population.partition_of, set(), []
        for reply in replies:
            pid = partition.get(reply.metadata.src_node_id)
            if pid is not None and pid in addressed and pid not in seen:
                seen.add(pid)
                senders.append((pid, reply))
        return sorted(senders, key=lambda item: item[0])

    def sort_replies(self, replies: Iterable[Message]) -> RoundReplies:
        """Accept sound updates; name the clients that failed, sent a malformed update or did not answer."""
        outcome = RoundReplies()
        for pid, reply in self._senders(replies, self._cohort):
            if reply.has_error():
                outcome.failed[pid] = error_summary(reply.error.reason or "")
                continue
            _, reason = refusal(self.check_reply, pid, reply.content)
            if reason:
                outcome.rejected[pid] = reason
            else:
                outcome.accepted[pid] = reply
        answered = set(outcome.accepted) | set(outcome.failed) | set(outcome.rejected)
        outcome.timed_out = sorted(pid for pid in self._cohort if pid not in answered)
        return outcome

    #: What a training reply holds besides θ and the metrics, for methods that reply with more (name -> record kind).
    reply_records: Mapping[str, type] = {}
    #: The numbers a training reply reports.
    reply_metrics: tuple[Number, ...] = TRAIN_METRICS

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """Raise ``Refused`` unless a training reply is sound (the protocol's checks; a method extends this to read
        its own records)."""
        identity = self.population.identity_of(partition_id)
        read_train_reply(
            content,
            self._expected_from[partition_id],
            identity,
            self.expected_examples(identity.num_examples),
            self.reply_metrics,
            self.reply_records,
        )

    def aggregate_evaluation(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Example-weighted mean loss and accuracy of the round's sound evaluation replies; the others are named."""
        accepted: list[dict[str, int | float]] = []
        problems: dict[int, str] = {}
        for pid, reply in self._senders(replies, self._evaluated):
            if reply.has_error():
                problems[pid] = f"failed: {error_summary(reply.error.reason or '')}"
                continue
            metrics, reason = refusal(read_evaluate_reply, reply.content, self.population.identity_of(pid))
            if metrics is None:
                problems[pid] = f"rejected: {reason}"
            else:
                accepted.append(metrics)
        for pid, problem in problems.items():
            log(WARNING, "round %d: evaluation by client %d %s", server_round, pid, problem)
        means = weighted_means(accepted, [EVAL_LOSS, EVAL_ACCURACY])
        self.observer.evaluations_received(
            server_round,
            federated_loss=means.get(EVAL_LOSS),
            federated_accuracy=means.get(EVAL_ACCURACY),
            evaluated=len(accepted),
            evaluation_problems=_reasons(problems),
        )
        return MetricRecord(means) if means else None

    def replies_sorted(self, outcome: RoundReplies) -> None:
        """Hook for subclasses that track per-client state; called once per round before aggregation."""

    def aggregate_round(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Round ``server_round``'s accepted updates aggregated under the ``aggregation`` rule; the round is skipped
        (the global model kept) when fewer than ``min_train_nodes`` were accepted, or fewer than the rule needs.

        Replies are put in partition-id order first: float sums depend on the order of their terms, and
        arrival order varies from run to run.
        """
        replies = list(replies)
        with span(DECODE, round=server_round):
            outcome = self.sort_replies(replies)
        for kind, reasons in (("failed", outcome.failed), ("was rejected", outcome.rejected)):
            for pid, reason in reasons.items():
                log(WARNING, "round %d: client %d %s: %s", server_round, pid, kind, reason)
        if outcome.timed_out:
            log(WARNING, "round %d: no reply within the round timeout from clients %s", server_round, outcome.timed_out)
        self.replies_sorted(outcome)
        needed = max(self.min_train_nodes, min_clients(self.aggregation))
        aggregated = len(outcome.accepted) >= needed
        contents = [r.content for r in outcome.accepted.values()]
        with span(AGGREGATION, round=server_round):
            arrays, report = self.aggregate_arrays(contents, list(outcome.accepted)) if aggregated else (None, {})
        received = [record for r in replies if not r.has_error() for record in r.content.array_records.values()]
        self.observer.replies_received(
            server_round,
            [client_stats_of(r) for r in outcome.accepted.values()],
            sum(record.count_bytes() for record in received),
            aggregated=aggregated,
            **outcome.problems(),
            **report,
        )
        if not aggregated:
            log(
                WARNING,
                "round %d skipped: %d sound updates, the round needs %d (min-train-nodes %d, aggregation "
                "%s); the global model is unchanged",
                server_round,
                len(outcome.accepted),
                needed,
                self.min_train_nodes,
                self.aggregation.rule,
            )
            return None, None
        return arrays, self.train_metrics_aggr_fn(contents, self.weighted_by_key)

    def global_arrays(self, carried: ArrayRecord) -> ArrayRecord:
        """The round's global model θ, given the arrays Flower carries into the next round: the same arrays, except
        for methods whose global model is not what they send (FedFSC: {θ_fs^t, φ^t} while the base travels)."""
        return carried

    def round_evaluation(self, carried: ArrayRecord, evaluate: CentralEvaluation) -> dict[str, Any]:
        """Further central evaluations recorded with the round (FedFSC: the base model, each few-shot classifier)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the strategy beyond the global arrays (FedFSC: the few-shot classifier)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``state_dict()`` when a run resumes."""

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """The new global arrays from the accepted replies (in partition-id order), and the rule's report for
        rounds.jsonl (who was clipped, capped or kept)."""
        if self.aggregation.rule == MEAN:  # FedAvg exactly as Flower computes it, over θ alone (not reply_records)
            models = [
                RecordDict({ARRAYS: c.array_records[ARRAYS], METRICS: c.metric_records[METRICS]}) for c in contents
            ]
            return conform_to(aggregate_arrayrecords(models, self.weighted_by_key), self._expected), {}
        client_arrays = [{k: a.numpy() for k, a in c.array_records[ARRAYS].items()} for c in contents]
        weights = [float(c.metric_records[METRICS][NUM_EXAMPLES]) for c in contents]  # type: ignore[arg-type]
        sent = {key: array.numpy() for key, array in self._sent.items()}
        result = robust_aggregate(self.aggregation, client_arrays, weights, sent)
        return ArrayRecord({k: Array(v) for k, v in result.arrays.items()}), result.report(partition_ids)
