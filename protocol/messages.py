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

- Feature metadata (FedSplit, FedAT), custom-size client models (FedAT, FedKAD, FedMD) and stragglers doing partial
  work, which several methods and the shared strategies use: the blocks at the end.

A method that needs more declares its records, its numbers and their checks in its own package, so that both sides
read one declaration: ``methods/kafal/records.py``, ``methods/fedfsc/records.py``, ``methods/scaffold/records.py``.
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

# FedSplit (methods/fedsplit/method.py): a training reply also carries the client's metadata D_k,meta, the feature maps
# of its selected samples (all of them under ``fedsplit-all``) at ``common.metadata-level``, with their labels.
FEATURE_METADATA = "feature-metadata"  # ArrayRecord holding exactly FEATURE_MAPS and MAP_LABELS
FEATURE_MAPS = "feature-maps"  # float32, S × (the model's map shape at metadata-level), S ≥ 1
MAP_LABELS = "labels"  # int64, S, each in [0, classes)
METADATA_SECONDS = "metadata-seconds"  # extracting the maps and selecting among them, apart from train-seconds
FEDSPLIT_TRAIN_METRICS = (*TRAIN_METRICS, Number(METADATA_SECONDS, float, 0.0, MAX_SECONDS))
# Custom-size client models (thesis Ch. 5: FedAT, FedKAD, FedMD) and shortened straggler work.
# - ``query.client_model``: the server sends ``config`` (empty); the client replies ``client-model``: ``model``, the
#   architecture it trains (its node config's ``model`` in deployment, else the ``common.client-models`` entry for its
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

# The pretraining round (thesis §6.4.1, step 2 of the pretraining phase; server_app/pretraining_round.py): a ``train``
# message whose ``config`` holds ``pretraining-round`` = true. ``arrays`` holds the whole model (no ``frozen``);
# ``config`` adds ``tolerance`` and ``max-epochs``, the convergence rule. Every client trains every array on all its
# data until its mean epoch loss stops improving by ``tolerance``, at most ``max-epochs`` epochs, and replies with the
# whole model and ``PRETRAINING_ROUND_METRICS``: the training numbers (``num-examples`` = every local sample) and
# ``epochs``, how many it ran (1 to ``max-epochs``).
PRETRAINING_ROUND = "pretraining-round"
TOLERANCE = "tolerance"
MAX_EPOCHS = "max-epochs"
EPOCHS = "epochs"
PRETRAINING_ROUND_METRICS = (*TRAIN_METRICS, Number(EPOCHS, int, 1))
