"""Every message the server sends and every reply it accepts: names, record keys, and the numbers a reply may hold.

- ``query.identify``: the server sends ``config`` (``with-label-counts``: true when it wants the label counts
  too); the client replies ``identity``: partition-id, num-partitions, num-examples, and, when asked, ``label-counts``
  as it answers ``query.label_counts`` (one query per client at the start instead of two).
- ``query.label_counts``: the server sends ``config`` (empty); the client replies ``label-counts``: ``counts``, one
  whole number ≥ 0 per class.
- ``train``: the server sends ``arrays`` (θ), ``frozen`` (φ, until the node holds it), ``config`` (server-round,
  learning-rate); the client replies ``arrays`` (θ after training) and ``metrics`` (``TRAIN_METRICS``).
- ``evaluate``: the server sends ``arrays``, ``frozen``, ``config`` (server-round); the client replies ``metrics``
  (``EVALUATE_METRICS``).

- FedFSC-family ``train`` (methods/fedfsc/method.py): the config also says the client's work (``full-epochs``,
  ``fewshot``); replies add the few-shot classifier and its numbers, or hold only those (the block at the end).
- Custom-size client models (FedAT, FedKAD, FedMD) and stragglers doing partial work: the block at the end.

A method that needs more declares its records and numbers here too, so that both sides read one declaration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flwr.app import MessageType

# Message types.
IDENTIFY = "query.identify"
LABEL_COUNTS = "query.label_counts"
TRAIN = MessageType.TRAIN
EVALUATE = MessageType.EVALUATE

# Record keys.
ARRAYS = "arrays"  # θ: sent with train and evaluate requests, returned by training
FROZEN = "frozen"  # φ: sent until the client holds it
CONFIG = "config"  # the round's settings
METRICS = "metrics"  # what a client reports about its work
IDENTITY = "identity"
LABEL_COUNTS_RECORD = "label-counts"
COUNTS = "counts"  # in LABEL_COUNTS_RECORD: the label-count vector

# Keys of the config record the server sends.
WITH_LABEL_COUNTS = "with-label-counts"  # query.identify: reply with the label counts too
SERVER_ROUND = "server-round"
LEARNING_RATE = "learning-rate"

# Keys of the numbers clients report.
PARTITION_ID = "partition-id"
NUM_PARTITIONS = "num-partitions"
NUM_EXAMPLES = "num-examples"  # identify: samples held; train: samples trained on (the aggregation weight)
NUM_LOCAL = "num-local"
TRAIN_LOSS = "train-loss"
TRAIN_SECONDS = "train-seconds"
SELECTION_SECONDS = "selection-seconds"
CACHE_SECONDS = "cache-seconds"
SELECTED_ENTROPY_MEAN = "selected-entropy-mean"
LOCAL_ENTROPY_MEAN = "local-entropy-mean"
THREADS = "threads"
EVAL_LOSS = "eval-loss"
EVAL_ACCURACY = "eval-acc"

#: No honest client reports a duration longer than this (a week); larger values are refused.
MAX_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Number:
    """One number a reply holds: its key, type and closed range."""

    key: str
    kind: type  # int or float
    low: float = -math.inf
    high: float = math.inf
    optional: bool = False  # a reply may leave it out; when present it is checked like the others


IDENTITY_FIELDS = (
    Number(PARTITION_ID, int, 0),
    Number(NUM_PARTITIONS, int, 1),
    Number(NUM_EXAMPLES, int, 1),
)
TRAIN_METRICS = (
    Number(PARTITION_ID, int, 0),
    Number(NUM_EXAMPLES, int, 1),
    Number(NUM_LOCAL, int, 1),
    Number(TRAIN_LOSS, float, 0.0),
    Number(TRAIN_SECONDS, float, 0.0, MAX_SECONDS),
    Number(SELECTION_SECONDS, float, 0.0, MAX_SECONDS),
    Number(CACHE_SECONDS, float, 0.0, MAX_SECONDS),
    # Reported where the client ran the entropy pass (entropy selection, or `entropy-metrics`).
    Number(SELECTED_ENTROPY_MEAN, float, 0.0, optional=True),
    Number(LOCAL_ENTROPY_MEAN, float, 0.0, optional=True),
    Number(THREADS, int, 1, 4096),
)
EVALUATE_METRICS = (
    Number(EVAL_LOSS, float, 0.0),
    Number(EVAL_ACCURACY, float, 0.0, 1.0),
    Number(NUM_EXAMPLES, int, 1),
)

# KAFAL, federated active learning (methods/kafal/). ``train`` requests also carry the cycle and the round within it;
# training replies report ``AL_TRAIN_METRICS`` (``num-examples`` = the labelled pool, the aggregation weight, Eq. 7).
# ``query.al_query``: after a cycle's last round the server sends every client ``arrays`` (the cycle's final global
# model) and ``config`` (server-round, al-cycle); the client queries its budget of unlabelled samples and replies
# ``al-query`` (``AL_QUERY_FIELDS``) and ``al-labelled-counts`` (``counts``: its labelled pool per class).
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
# FedFSC / FedFSC+ and the baseline+ variants (methods/fedfsc/method.py). A training message's config says what the
# client does; a client that runs the normal update replies ``arrays`` and ``metrics`` (``TRAIN_METRICS``) as usual, one
# that few-shot updates adds its classifier and ``FEWSHOT_NUMBERS``; one that only few-shot updates replies the
# classifier, ``FEWSHOT_ONLY_METRICS`` and ``FEWSHOT_NUMBERS``. With FSCProx the server sends normal updates the
# averaged few-shot classifier θ_fs as their regulariser's anchor.
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
# FedSplit (methods/fedsplit/method.py): a training reply also carries the client's metadata D_k,meta, the feature maps
# of its selected samples (all of them under ``fedsplit-all``) at ``metadata-level``, with their labels.
FEATURE_METADATA = "feature-metadata"  # ArrayRecord holding exactly FEATURE_MAPS and MAP_LABELS
FEATURE_MAPS = "feature-maps"  # float32, S × (the model's map shape at metadata-level), S ≥ 1
MAP_LABELS = "labels"  # int64, S, each in [0, classes)
METADATA_SECONDS = "metadata-seconds"  # extracting the maps and selecting among them, apart from train-seconds
FEDSPLIT_TRAIN_METRICS = (*TRAIN_METRICS, Number(METADATA_SECONDS, float, 0.0, MAX_SECONDS))
# Custom-size client models (thesis Ch. 5: FedAT, FedKAD, FedMD) and shortened straggler work.
# - ``query.client_model``: the server sends ``config`` (empty); the client replies ``client-model``: ``model``, the
#   architecture it trains (its node config's ``model`` in deployment, else the ``client-models`` entry for its
#   partition).
# - ``train`` of a custom-size method: ``arrays`` holds that client's own model (every array of it), ``config`` adds
#   ``model`` (its architecture); a FedAT reply adds ``metadata`` (``feature-maps``: N × C × H × W float32 maps of all
#   N local samples at the metadata level; ``labels``: their N int64 labels), a FedKAD reply adds ``prototypes``
#   (``maps``: one mean map per class, zero for an absent class; ``present``: 1 where the client holds the class).
# - ``local-epochs`` in a train config: this client's epochs this round, when they differ from the run's (a straggler
#   doing partial work, or a client's first round with the FedMD initialisation).
CLIENT_MODEL = "query.client_model"
CLIENT_MODEL_RECORD = "client-model"
MODEL_NAME = "model"
LOCAL_EPOCHS = "local-epochs"
METADATA = "metadata"
PROTOTYPES = "prototypes"
CLASS_MAPS = "maps"
CLASS_PRESENT = "present"
