"""KAFAL's messages and their checks (methods/kafal/): what its training requests and replies add to the protocol's,
and its end-of-cycle query.

``train`` requests also carry the cycle and the round within it; training replies report ``AL_TRAIN_METRICS``
(``num-examples`` = the labelled pool, the aggregation weight, Eq. 7). ``query.al_query``: after a cycle's last round
the server sends every client ``arrays`` (the cycle's final global model) and ``config`` (server-round, al-cycle); the
client queries its budget of unlabelled samples and replies ``al-query`` (``AL_QUERY_FIELDS``) and
``al-labelled-counts`` (``counts``: its labelled pool per class).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.app import MetricRecord, RecordDict

from protocol.messages import (
    COUNTS,
    MAX_SECONDS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
    Number,
)
from protocol.replies import Identity, Refused, check_records, key_names, read_numbers

AL_QUERY = "query.al_query"
AL_CYCLE = "al-cycle"  # 0-based cycle of the request
AL_CYCLE_ROUND = "al-cycle-round"  # 1-based round within the cycle (Alg. 2: no compensation in round 1)
AL_QUERY_RECORD = "al-query"
AL_COUNTS_RECORD = "al-labelled-counts"
NUM_QUERIED = "num-queried"
NUM_LABELLED = "num-labelled"
QUERY_SECONDS = "query-seconds"
CLIENT_LOSS = "client-loss"
COMPENSATION_LOSS = "compensation-loss"
AL_TRAIN_METRICS = (
    Number(PARTITION_ID, int, 0),
    Number(NUM_EXAMPLES, int, 1),
    Number(NUM_LOCAL, int, 1),
    Number(TRAIN_LOSS, float, 0.0),
    Number(CLIENT_LOSS, float, 0.0),
    Number(COMPENSATION_LOSS, float, 0.0),
    Number(TRAIN_SECONDS, float, 0.0, MAX_SECONDS),
    Number(THREADS, int, 1, 4096),
)
AL_QUERY_FIELDS = (
    Number(PARTITION_ID, int, 0),
    Number(NUM_LOCAL, int, 1),
    Number(NUM_QUERIED, int, 0),
    Number(NUM_LABELLED, int, 1),
    Number(QUERY_SECONDS, float, 0.0, MAX_SECONDS),
)


@dataclass(frozen=True)
class QueryReport:
    """A sound ``query.al_query`` reply (KAFAL): how many samples the client labelled, its pool, the time it took."""

    num_queried: int
    num_labelled: int
    query_seconds: float
    counts: np.ndarray  # the labelled pool per class, after the query


def read_al_query_reply(
    content: RecordDict,
    identity: Identity,
    num_classes: int,
    budget: int,
    labelled_before: int | None,
    counts_before: np.ndarray | None = None,
) -> QueryReport:
    """A ``query.al_query`` reply: it speaks for its own partition, labelled exactly its ``budget`` of new samples on
    top of the ``labelled_before`` the server expects (None: unknown after an earlier failure), and its labelled
    class counts are whole numbers adding up to its pool that never shrink (``counts_before``: the last sound ones)."""
    check_records(content, {AL_QUERY_RECORD: MetricRecord, AL_COUNTS_RECORD: MetricRecord})
    numbers = read_numbers(content[AL_QUERY_RECORD], AL_QUERY_FIELDS, "al-query")
    if numbers[PARTITION_ID] != identity.partition_id:
        raise Refused(f"reports partition-id {numbers[PARTITION_ID]}, but this client is {identity.partition_id}")
    if numbers[NUM_LOCAL] != identity.num_examples:
        raise Refused(f"'num-local' = {numbers[NUM_LOCAL]}, but the client said it holds {identity.num_examples}")
    if numbers[NUM_QUERIED] != budget:
        raise Refused(f"'num-queried' = {numbers[NUM_QUERIED]}, but the cycle's budget is {budget}")
    labelled = int(numbers[NUM_LABELLED])
    if labelled > identity.num_examples:
        raise Refused(f"'num-labelled' = {labelled} exceeds the {identity.num_examples} samples the client holds")
    if labelled_before is not None and labelled != labelled_before + budget:
        raise Refused(f"'num-labelled' = {labelled}, expected {labelled_before} labelled before + {budget} queried")
    record = content[AL_COUNTS_RECORD]
    if set(record.keys()) != {COUNTS}:
        raise Refused(f"labelled counts must hold only '{COUNTS}', got {key_names(record.keys())}")
    raw = record[COUNTS]
    if not isinstance(raw, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        raise Refused("labelled counts are not a list of whole numbers")
    counts = np.asarray(raw, dtype=np.int64)
    if counts.shape != (num_classes,) or np.any(counts < 0):
        raise Refused(f"labelled counts must be {num_classes} whole numbers >= 0")
    if int(counts.sum()) != labelled:
        raise Refused(f"labelled counts add up to {int(counts.sum())}, but 'num-labelled' = {labelled}")
    if counts_before is not None and np.any(counts < counts_before):
        raise Refused("labelled counts shrank since the last cycle: a labelled sample cannot become unlabelled")
    return QueryReport(int(numbers[NUM_QUERIED]), labelled, float(numbers[QUERY_SECONDS]), counts)
