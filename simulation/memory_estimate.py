"""A simulation's peak memory, estimated at start from the dataset, the model, the population and the cohort.

A population or cohort the machine cannot hold should be refused before Ray starts, with the estimate, instead of
ending in an out-of-memory kill in the middle of a run. The estimate adds what one run holds at its peak:

- fixed processes: the launcher, ``flwr run``, the SuperLink, the SuperExecs and Ray's daemons
  (``PLATFORM_BYTES``), plus the simulation engine's bookkeeping per SuperNode and the state every client that
  trained keeps in its context there (the frozen part φ it was sent);
- the ServerApp and the simulation engine, one process (``SERVER_BYTES``): the test set as float tensors, its
  frozen features when central evaluation caches them (built batch by batch, then joined: twice their size), the
  activations of an evaluation batch, and the global model, its copies and the cohort's replies;
- each ClientApp actor that runs at once (Ray starts as many as the CPUs hold, whatever the population): a process
  with torch (``ACTOR_BYTES``), a few copies of the model (decoded, trained, gradients, momentum, reply), the
  activations of a training batch (kept for the backward pass) and of a forward-only batch (``eval-batch-size``),
  one client's data as float tensors (``CLIENT_DATA_COPIES`` of them), and the frozen features it caches for the
  distinct clients it is expected to serve over the run (Ray hands each training to any free actor), up to
  ``feature-cache-mb``;
- the decoded dataset, once: every process maps the same cached arrays.

The constants were measured on the 2-core development machine (PSS summed over a run's processes, broken down by
process: ``python -m benchmarks.cost_model``); RESULTS.md compares the estimate with every measured run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 2**20
# Measured per process kind on the 2-core machine (``benchmarks.cost_model`` breaks each run's peak down), then the
# six constants marked "fitted" set together to the values that keep the estimate closest to the peak of all 30
# recorded runs (worst 0.85× and 1.18×; ``python -m benchmarks.memory_estimate_check`` lists them).
#: Launcher, ``flwr run``, SuperLink, SuperExecs and Ray's daemons, without their per-node part (measured 740 to
#: 890 MiB: 270 launcher, 240 Ray daemons, 140 SuperLink, 90 SuperExecs, sometimes a 120 MiB idle Ray worker).
PLATFORM_BYTES = 800 * MIB
#: A ClientApp actor, a Ray worker that imported torch, Flower and the app, before its data and model (fitted; an
#: actor serving clients of 4.8 images measured 270 to 290 MiB).
ACTOR_BYTES = 200 * MIB
#: The simulation engine's process (Ray's driver, Flower and the ServerApp with torch), before its data and model
#: (fitted; 380 to 430 MiB measured with LeNet-5, test set included).
SERVER_BYTES = 330 * MIB
#: The simulation engine's and Ray's memory per SuperNode (its context and queues): measured 43 KiB from 1,000 to
#: 10,000 clients with LeNet-5 and WRN-16-1.
NODE_BYTES = 43 * 2**10
#: Float copies of a client's images an actor holds while it trains (fitted: normalised, shuffled, batches, and
#: freed memory the allocator keeps; an actor's memory grew 32 KiB per local image with LeNet-5 FedAvg).
CLIENT_DATA_COPIES = 10
#: Model-sized buffers an actor holds while training: received, trained, gradients, momentum, reply.
CLIENT_MODEL_COPIES = 5
#: Model-sized buffers the ServerApp holds besides the cohort's replies: global, aggregate, checkpoint.
SERVER_MODEL_COPIES = 3
#: Activation-sized buffers of a training step per image of the batch: the forward's outputs kept for the backward
#: pass and the backward's gradients (fitted; 2.0× measured for WRN-16-1 at batch 64 alone in one process).
TRAINING_ACTIVATION_COPIES = 3
#: Largest-layer-sized buffers of a forward-only pass per image of the batch: a layer's input and output and the
#: allocator's reuse (fitted; 2.6× measured for WRN-16-1 at batch 500 alone in one process).
FORWARD_ACTIVATION_COPIES = 4
FLOAT32_BYTES = 4


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
    server_feature_bytes: int  # the test set's frozen features as central evaluation caches them; 0 when it does not
    node_state_bytes: int  # what a client that trained keeps in its context (φ's weights); 0 when nothing


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


def estimate_peak(size: SimulationSize) -> MemoryEstimate:
    """The estimated peak memory of the whole simulation (``size``'s numbers, nothing measured now)."""
    model_bytes = size.model_parameters * FLOAT32_BYTES
    client_samples = math.ceil(size.client_samples / size.num_supernodes)
    served = clients_served(size.num_supernodes, size.rounds * size.clients_per_round, size.concurrent_clients)
    features = min(size.feature_cache_cap_bytes, round(served * client_samples * size.feature_bytes_per_sample))
    forward = FORWARD_ACTIVATION_COPIES * size.eval_batch_size * size.largest_activation * FLOAT32_BYTES
    training = TRAINING_ACTIVATION_COPIES * size.batch_size * size.activation_values * FLOAT32_BYTES
    actor = (
        ACTOR_BYTES
        + CLIENT_MODEL_COPIES * model_bytes
        + training
        + forward
        + CLIENT_DATA_COPIES * client_samples * size.sample_values * FLOAT32_BYTES
        + features
    )
    server = (
        SERVER_BYTES
        + (SERVER_MODEL_COPIES + size.clients_per_round) * model_bytes
        + forward
        + size.test_samples * size.sample_values * FLOAT32_BYTES
        + 2 * size.server_feature_bytes
    )
    return MemoryEstimate(
        platform=PLATFORM_BYTES,
        per_node=size.num_supernodes * NODE_BYTES
        + round(clients_trained(size.num_supernodes, size.clients_per_round, size.rounds) * size.node_state_bytes),
        server=server,
        clients=size.concurrent_clients * actor,
        dataset=size.dataset_bytes,
    )
