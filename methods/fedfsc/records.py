"""The FedFSC family's messages and their checks (methods/fedfsc/).

A training message's config says what the client does; a client that runs the normal update replies ``arrays`` and
``metrics`` (``TRAIN_METRICS``) as usual, one that few-shot updates adds its classifier and ``FEWSHOT_NUMBERS``; one
that only few-shot updates replies the classifier, ``FEWSHOT_ONLY_METRICS`` and ``FEWSHOT_NUMBERS``. With FSCProx
the server sends normal updates the averaged few-shot classifier θ_fs as their regulariser's anchor.
"""

from __future__ import annotations

from collections.abc import Mapping

from flwr.app import ArrayRecord, MetricRecord, RecordDict

from protocol.messages import (
    MAX_SECONDS,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    THREADS,
    TRAIN_LOSS,
    TRAIN_METRICS,
    TRAIN_SECONDS,
    Number,
)
from protocol.replies import (
    ArraySpec,
    Identity,
    Refused,
    check_arrays,
    check_counts,
    check_records,
    read_numbers,
    read_train_reply,
)

FULL_EPOCHS = "full-epochs"  # config: epochs of the normal update (0: none)
FEWSHOT = "fewshot"  # config: true when the client few-shot updates the classifier
FEWSHOT_ANCHOR = "fewshot-anchor"  # train message: θ_fs, FSCProx's anchor (final Linear keys)
FEWSHOT_CLASSIFIER = "fewshot-classifier"  # reply: the few-shot trained final Linear layer (weight, bias)
FEWSHOT_METRICS = "fewshot-metrics"  # reply: FEWSHOT_NUMBERS
FEWSHOT_SHOTS_USED = "fewshot-shots"  # shots per class the update drew (fewer when no class has n samples)
FEWSHOT_CLASSES = "fewshot-classes"  # eligible classes
FEWSHOT_EXAMPLES = "fewshot-examples"  # shots × classes
FEWSHOT_LOSS = "fewshot-loss"
FEWSHOT_SECONDS = "fewshot-seconds"  # features and classifier training (part of train-seconds)
FEWSHOT_NUMBERS = (
    Number(FEWSHOT_SHOTS_USED, int, 1),
    Number(FEWSHOT_CLASSES, int, 1),
    Number(FEWSHOT_EXAMPLES, int, 1),
    Number(FEWSHOT_LOSS, float, 0.0),
    Number(FEWSHOT_SECONDS, float, 0.0, MAX_SECONDS),
)
FEWSHOT_ONLY_METRICS = (
    Number(PARTITION_ID, int, 0),
    Number(NUM_EXAMPLES, int, 1),  # the few-shot examples
    Number(NUM_LOCAL, int, 1),
    Number(TRAIN_LOSS, float, 0.0),
    Number(TRAIN_SECONDS, float, 0.0, MAX_SECONDS),
    Number(THREADS, int, 1, 4096),
)


def read_fedfsc_reply(
    content: RecordDict,
    *,
    full: bool,
    fewshot: bool,
    expected: Mapping[str, ArraySpec],
    classifier: Mapping[str, ArraySpec],
    identity: Identity,
    expected_examples: int | None,
    max_shots: int,
) -> dict[str, int | float]:
    """A FedFSC-family training reply for the work its client was given: the normal update's reply (``full``), a
    few-shot update's classifier and numbers (``fewshot``), or both. The classifier has the shapes of the final
    Linear layer the server sent (``classifier``); a few-shot update drew at most ``max_shots`` per class, as many
    from each eligible class, from samples the client holds. Returns the reply's ``metrics``."""
    extra = {FEWSHOT_CLASSIFIER: ArrayRecord, FEWSHOT_METRICS: MetricRecord} if fewshot else {}
    if full:
        numbers = read_train_reply(content, expected, identity, expected_examples, TRAIN_METRICS, extra)
    else:
        check_records(content, {METRICS: MetricRecord, **extra})
        numbers = read_numbers(content.metric_records[METRICS], FEWSHOT_ONLY_METRICS, "metrics")
        check_counts(numbers, identity, None)
    if not fewshot:
        return numbers
    check_arrays(content.array_records[FEWSHOT_CLASSIFIER], classifier)
    few = read_numbers(content.metric_records[FEWSHOT_METRICS], FEWSHOT_NUMBERS, FEWSHOT_METRICS)
    num_classes = min((spec.shape[0] for spec in classifier.values()), default=0)
    if few[FEWSHOT_SHOTS_USED] > max_shots:
        raise Refused(f"'{FEWSHOT_SHOTS_USED}' = {few[FEWSHOT_SHOTS_USED]} exceeds the {max_shots} shots asked for")
    if few[FEWSHOT_CLASSES] > num_classes:
        raise Refused(f"'{FEWSHOT_CLASSES}' = {few[FEWSHOT_CLASSES]} exceeds the model's {num_classes} classes")
    if few[FEWSHOT_EXAMPLES] != few[FEWSHOT_SHOTS_USED] * few[FEWSHOT_CLASSES]:
        raise Refused(f"'{FEWSHOT_EXAMPLES}' = {few[FEWSHOT_EXAMPLES]} is not shots × classes")
    if few[FEWSHOT_EXAMPLES] > identity.num_examples:
        raise Refused(
            f"'{FEWSHOT_EXAMPLES}' = {few[FEWSHOT_EXAMPLES]} exceeds the {identity.num_examples} samples held"
        )
    if not full and numbers[NUM_EXAMPLES] != few[FEWSHOT_EXAMPLES]:
        raise Refused(f"'num-examples' = {numbers[NUM_EXAMPLES]}, but the few-shot update used {few[FEWSHOT_EXAMPLES]}")
    return numbers
