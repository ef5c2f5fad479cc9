"""A simulation's peak memory, estimated at start from the dataset, the model, the population and the cohort.

A population or cohort the machine cannot hold should be refused before Ray starts, with the estimate, instead of
ending in an out-of-memory kill in the middle of a run. The estimate adds what one run holds at its peak:

- fixed processes: the launcher, ``flwr run``, the SuperLink, the SuperExecs and Ray's daemons
  (``platform_bytes``), plus the simulation engine's bookkeeping per SuperNode and the state every client that
  trained keeps in its context there (the frozen part φ it was sent);
- the ServerApp and the simulation engine, one process (``server_bytes``): the test set as float tensors, its
  frozen features when central evaluation caches them (written batch by batch into one tensor), the
  activations of an evaluation batch, and the global model, its copies and the cohort's replies (``reply_copies``
  model-sized buffers each);
- each ClientApp actor that runs at once (Ray starts as many as the CPUs hold, whatever the population): a process
  with torch (``actor_bytes``), a few copies of the model (decoded, trained, gradients, momentum, reply), the
  activations of a training batch (kept for the backward pass) and of a forward-only batch (``eval-batch-size``),
  one client's data as float tensors (``client_data_copies`` of them), and, without a ``feature-cache-dir``, the
  frozen features it caches for the distinct clients it is expected to serve over the run (Ray hands each training
  to any free actor), up to ``feature-cache-mb``; with one (the default), the actors map the features from its
  files instead, so that the clients' features count once, for every client expected to have trained (up to
  ``feature-cache-mb`` per actor);
- when the server pretrains during the run (no cached weights), what pretraining holds in the engine's process: its
  images as float tensors (twice: all, and the training and validation slices), the decoded source dataset of
  ``pretrain = "dataset"``, copies of the model, a training batch's activations and a forward batch of its
  BatchNorm re-estimation;
- the decoded dataset, once: every process maps the same cached arrays (PSS spreads it over those that read it;
  ``python -m benchmarks scale --fit`` takes it out of the measured parts before it fits the bases).

The per-node, model-copy and byte constants are counted or measured directly. The seven in ``FittedConstants`` come
from the recorded runs' peaks (PSS summed over a run's processes at its peak and broken down by process kind, on
the 2-core development machine): the platform is the median of what the runs' processes other than the engine and
the actors held; for each choice of the four copy counts, the actor's and the server's bases are the offsets
that bring the actors' and the engine's estimated parts closest (least worst ratio) to their measured parts; the
copy counts kept are those whose whole estimate has the least worst ratio to the measured peaks.
``python -m benchmarks scale --estimate`` compares the estimate with every recorded run, ``--fit`` derives
the constants again; docs/results.md has both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 2**20
#: The simulation engine's and Ray's memory per SuperNode (its context and queues): measured 43 KiB from 1,000 to
#: 10,000 clients with LeNet-5 and WRN-16-1.
NODE_BYTES = 43 * 2**10
#: Model-sized buffers an actor holds while training: received, trained, gradients, momentum, reply.
CLIENT_MODEL_COPIES = 5
#: Model-sized buffers the ServerApp holds besides the cohort's replies: global, aggregate, checkpoint.
SERVER_MODEL_COPIES = 3
#: Float copies of its images pretraining holds: all of them, and the training and validation slices taken from them.
PRETRAIN_IMAGE_COPIES = 2
#: Model-sized buffers pretraining holds: the model trained (a source model for ``pretrain = "dataset"``), its
#: gradients and momentum, and the target model's state.
PRETRAIN_MODEL_COPIES = 4
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class FittedConstants:
    """The estimate's constants that no one measurement gives, set from the peaks of the recorded runs broken down
    by process kind (``python -m benchmarks scale --fit`` derives them; the module's docstring
    says how)."""

    #: Launcher, SuperLink, SuperExecs and Ray's daemons, without their per-node part.
    platform_bytes: int
    #: A ClientApp actor (a Ray worker that imported torch, Flower and the app) before its data and model.
    actor_bytes: int
    #: The simulation engine's process (Ray's driver, Flower and the ServerApp with torch) before its data and model.
    server_bytes: int
    #: Float copies of a client's images an actor holds while it trains (normalised, shuffled, batches, and freed
    #: memory the allocator keeps).
    client_data_copies: int
    #: Activation-sized buffers of a training step per image of the batch: the forward's outputs kept for the
    #: backward pass and the backward's gradients.
    training_activation_copies: int
    #: Largest-layer-sized buffers of a forward-only pass per image of the batch: a layer's input and output and the
    #: allocator's reuse.
    forward_activation_copies: int
    #: Model-sized buffers the simulation engine holds per reply of the cohort: the message as the SuperLink's state
    #: stores it, decoded, its arrays, and the aggregation's inputs.
    reply_copies: int


#: Fitted on 2026-11-23 to the 31 runs of the code since the fourth performance pass (cost-model grid, 10-client
#: scale runs, default runs first and cached): the estimate lies within 0.89x to 1.14x of each measured peak, and
#: within 0.89x to 1.17x of each run when that run is left out of the fit (``python -m
#: benchmarks scale --estimate`` lists them). The counts are poorly determined by these runs: others bring
#: the totals nearly as close.
FITTED = FittedConstants(
    platform_bytes=721 * MIB,
    actor_bytes=250 * MIB,
    server_bytes=290 * MIB,
    client_data_copies=7,
    training_activation_copies=1,
    forward_activation_copies=4,
    reply_copies=10,
)


@dataclass(frozen=True)
class SimulationSize:
    """What a simulation's peak memory depends on, all known before it starts."""

    num_supernodes: int
    clients_per_round: int
    concurrent_clients: int  # ClientApp actors Ray runs at once
    rounds: int
    dataset_bytes: int  # decoded training and test images, shared by every process
    client_samples: int  # training images spread over the clients
    test_samples: int
    sample_values: int  # values of one image as a model reads it (channels × 32 × 32)
    model_parameters: int
    activation_values: int  # outputs of every layer of the model for one image
    largest_activation: int  # values of its largest layer output for one image
    batch_size: int
    eval_batch_size: int
    feature_bytes_per_sample: int  # cached frozen features of one image; 0 without a feature cache
    feature_cache_cap_bytes: int  # ``feature-cache-mb`` per process
    features_shared: bool  # the actors map the features from files in ``feature-cache-dir``, shared between them
    server_feature_bytes: int  # the test set's frozen features as central evaluation caches them; 0 when it does not
    node_state_bytes: int  # what a client that trained keeps in its context (φ's weights); 0 when nothing
    pretrain_samples: int = 0  # images the server pretrains on during this run; 0 when it does not (cached weights)
    pretrain_source_bytes: int = 0  # the decoded source dataset of ``pretrain = "dataset"``; 0 otherwise
    pretrain_batchnorm_batch_size: int = 0  # forward batch of pretraining's BatchNorm re-estimation


@dataclass(frozen=True)
class MemoryEstimate:
    """The estimated peak and its parts, in bytes."""

    platform: int
    per_node: int
    server: int
    clients: int
    dataset: int

    @property
    def total(self) -> int:
        return self.platform + self.per_node + self.server + self.clients + self.dataset


def actors_at_once(cpus: int, cpus_per_client: int, gpus: int = 0, gpus_per_client: float = 0.0) -> int:
    """ClientApp actors Ray runs at once on this machine, as Flower sizes its actor pool (CPUs, then GPUs)."""
    actors = cpus // cpus_per_client
    if gpus_per_client > 0:
        actors = min(actors, int(gpus / gpus_per_client))
    return actors


def clients_served(num_clients: int, trainings: int, actors: int) -> float:
    """Distinct clients one actor is expected to serve (and keep features of) when each of ``trainings`` trainings
    goes to one of ``num_clients`` clients and one of ``actors`` actors, all equally likely."""
    return num_clients * (1 - (1 - 1 / (num_clients * actors)) ** trainings)


def clients_trained(num_clients: int, per_round: int, rounds: int) -> float:
    """Distinct clients expected to have trained after ``rounds`` rounds of ``per_round`` drawn from
    ``num_clients`` at random: each keeps its state in its context from then on."""
    return num_clients * (1 - (1 - per_round / num_clients) ** rounds)


def estimate_peak(size: SimulationSize, constants: FittedConstants = FITTED) -> MemoryEstimate:
    """The estimated peak memory of the whole simulation (``size``'s numbers, nothing measured now)."""
    model_bytes = size.model_parameters * FLOAT32_BYTES
    client_samples = math.ceil(size.client_samples / size.num_supernodes)
    client_features = client_samples * size.feature_bytes_per_sample
    trained = clients_trained(size.num_supernodes, size.clients_per_round, size.rounds)
    if size.features_shared:  # one mapped copy of each trained client's features, however many actors read it
        private, shared = (
            0,
            min(size.concurrent_clients * size.feature_cache_cap_bytes, round(trained * client_features)),
        )
    else:  # each actor its own copy of the features of every client it served
        served = clients_served(size.num_supernodes, size.rounds * size.clients_per_round, size.concurrent_clients)
        private, shared = min(size.feature_cache_cap_bytes, round(served * client_features)), 0
    forward = constants.forward_activation_copies * size.eval_batch_size * size.largest_activation * FLOAT32_BYTES
    training = constants.training_activation_copies * size.batch_size * size.activation_values * FLOAT32_BYTES
    actor = (
        constants.actor_bytes
        + CLIENT_MODEL_COPIES * model_bytes
        + training
        + forward
        + constants.client_data_copies * client_samples * size.sample_values * FLOAT32_BYTES
        + private
    )
    pretraining = 0
    if size.pretrain_samples:  # in the engine's process while the clients start; the allocator keeps it after
        pretraining = (
            PRETRAIN_MODEL_COPIES * model_bytes
            + training
            + constants.forward_activation_copies
            * size.pretrain_batchnorm_batch_size
            * size.largest_activation
            * FLOAT32_BYTES
            + PRETRAIN_IMAGE_COPIES * size.pretrain_samples * size.sample_values * FLOAT32_BYTES
            + size.pretrain_source_bytes
        )
    server = (
        constants.server_bytes
        + pretraining
        + (SERVER_MODEL_COPIES + constants.reply_copies * size.clients_per_round) * model_bytes
        + forward
        + size.test_samples * size.sample_values * FLOAT32_BYTES
        + size.server_feature_bytes
    )
    return MemoryEstimate(
        platform=constants.platform_bytes,
        per_node=size.num_supernodes * NODE_BYTES + round(trained * size.node_state_bytes),
        server=server,
        clients=size.concurrent_clients * actor + shared,
        dataset=size.dataset_bytes,
    )
