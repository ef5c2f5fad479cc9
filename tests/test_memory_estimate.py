"""The start-time memory estimate: its arithmetic on fixed numbers, the available-memory reading, the refusal's
wording, and its distance from the peaks measured by ``benchmarks.cost_model``."""

from __future__ import annotations

import pytest

from benchmarks.memory_estimate_check import RecordedRun, recorded_runs
from data.catalog import DATASETS
from data.loading import load_dataset
from run_config import ConfigError
from run_config.overrides import config_with_overrides
from simulation import memory_check
from simulation.memory_check import available_from, check_memory, refusal, simulation_size
from simulation.memory_estimate import (
    ACTOR_BYTES,
    MIB,
    NODE_BYTES,
    PLATFORM_BYTES,
    SERVER_BYTES,
    MemoryEstimate,
    SimulationSize,
    actors_at_once,
    clients_served,
    clients_trained,
    estimate_peak,
)

GIB = 2**30
SIZE = SimulationSize(
    num_supernodes=1000,
    clients_per_round=10,
    concurrent_clients=2,
    rounds=3,
    dataset_bytes=55_000_000,
    client_samples=48_000,
    test_samples=10_000,
    sample_values=1024,
    model_parameters=100_000,
    activation_values=300_000,
    largest_activation=16_000,
    batch_size=64,
    eval_batch_size=500,
    feature_bytes_per_sample=16_384,
    feature_cache_cap_bytes=2048 * MIB,
    server_feature_bytes=80_000_000,
    node_state_bytes=200_000,
)


def test_estimate_adds_each_part_from_the_numbers() -> None:
    estimate = estimate_peak(SIZE)
    # 48 images a client; 30 trainings over 1,000 clients and 2 actors: each actor serves 14.9 distinct clients,
    # caching 48 × 16 KiB of features for each.
    served = 1000 * (1 - (1 - 1 / 2000) ** 30)
    assert round(served, 2) == 14.89
    forward = 4 * 500 * 16_000 * 4  # an evaluation batch through the largest layer
    training = 3 * 64 * 300_000 * 4  # a training batch's activations, kept for the backward pass, and their gradients
    data = 10 * 48 * 1024 * 4
    actor = ACTOR_BYTES + 5 * 400_000 + training + forward + data + round(served * 48 * 16_384)
    server = SERVER_BYTES + (3 + 10) * 400_000 + forward + 10_000 * 1024 * 4 + 2 * 80_000_000
    # 29.7 distinct clients trained in 3 rounds of 10 of 1,000, each keeping 200,000 bytes of φ in its context.
    contexts = 1000 * NODE_BYTES + 5_940_200
    assert estimate == MemoryEstimate(PLATFORM_BYTES, contexts, server, 2 * actor, 55_000_000)
    assert estimate.total == PLATFORM_BYTES + contexts + server + 2 * actor + 55_000_000


def test_feature_cache_counts_at_most_its_cap() -> None:
    capped = estimate_peak(SimulationSize(**{**vars(SIZE), "num_supernodes": 10, "feature_cache_cap_bytes": 100 * MIB}))
    # 7.9 clients × 4,800 images × 16 KiB > 100 MiB
    actor = ACTOR_BYTES + 5 * 400_000 + 3 * 64 * 300_000 * 4 + 4 * 500 * 16_000 * 4 + 10 * 4800 * 1024 * 4 + 100 * MIB
    assert capped.clients == 2 * actor


def test_an_actor_serves_every_client_of_a_small_population_and_a_share_of_a_large_one() -> None:
    assert round(clients_served(10, 100, 2), 3) == 9.941  # 10 clients, 10 rounds of all 10, 2 actors
    assert round(clients_served(10_000, 30, 2), 2) == 14.99  # 30 trainings, nearly all distinct, half to each actor
    assert clients_served(100, 0, 4) == 0


def test_clients_keep_state_once_they_trained() -> None:
    assert round(clients_trained(1000, 10, 3), 3) == 29.701
    assert round(clients_trained(10_000, 100, 100), 1) == 6339.7  # most of a large population, over a long run
    assert clients_trained(10, 10, 1) == 10


@pytest.mark.parametrize(
    ("cpus", "cpus_per_client", "gpus", "gpus_per_client", "actors"),
    [(2, 1, 0, 0.0, 2), (16, 3, 0, 0.0, 5), (16, 1, 1, 0.25, 4), (16, 1, 0, 0.5, 0)],
)
def test_actors_at_once_as_flower_sizes_its_pool(
    cpus: int, cpus_per_client: int, gpus: int, gpus_per_client: float, actors: int
) -> None:
    assert actors_at_once(cpus, cpus_per_client, gpus, gpus_per_client) == actors


MEMINFO = "MemTotal:       24683656 kB\nMemFree:         1000000 kB\nMemAvailable:    2000000 kB\n"


def test_available_memory_is_meminfo_or_the_lower_cgroup_headroom() -> None:
    assert available_from(MEMINFO, None, None) == 2_048_000_000
    assert available_from(MEMINFO, "max\n", "123\n") == 2_048_000_000
    assert available_from(MEMINFO, "1073741824\n", "73741824\n") == 1_000_000_000
    assert available_from(MEMINFO, "4294967296\n", "0\n") == 2_048_000_000


def test_refusal_names_the_estimate_the_available_memory_and_what_to_change() -> None:
    estimate = MemoryEstimate(platform=GIB // 10, per_node=0, server=GIB // 30, clients=GIB, dataset=0)
    assert refusal(SIZE, estimate, estimate.total) is None
    assert refusal(SIZE, estimate, 2**30) == (
        "this simulation needs about 1.1 GiB at its peak but 1.0 GiB of memory is available (1,000 clients, "
        "10 per round, 2 ClientApps at once of about 0.50 GiB each; the server 0.03 GiB, the clients' contexts "
        "0.00 GiB, Flower and Ray 0.10 GiB): lower --num-supernodes (NUM_SUPERNODES) or run config "
        "'fraction-train', or raise --cpus-per-client to run fewer ClientApps at once; FEDFT_MEMORY_AVAILABLE_MB "
        "replaces the available figure"
    )


def test_check_reads_the_available_figure_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_with_overrides("")
    monkeypatch.setenv(memory_check.AVAILABLE_ENV, "1000000")
    check_memory(config, 10, 1)  # a terabyte: passes
    monkeypatch.setenv(memory_check.AVAILABLE_ENV, "100")
    with pytest.raises(ConfigError, match=r"^this simulation needs about .* but 0\.1 GiB of memory is available"):
        check_memory(config, 10, 1)
    monkeypatch.setenv(memory_check.AVAILABLE_ENV, "lots")
    with pytest.raises(ConfigError, match="^FEDFT_MEMORY_AVAILABLE_MB='lots' is not a number of megabytes$"):
        check_memory(config, 10, 1)


def test_simulation_size_of_the_default_run() -> None:
    size = simulation_size(config_with_overrides(""), 10, 2)
    assert (size.clients_per_round, size.client_samples, size.test_samples) == (10, 4800, 1000)
    assert size.dataset_bytes == 7000 * (28 * 28 + 8)
    assert size.server_feature_bytes == 1000 * 32 * 16 * 16 * 4  # the test set's φ(x), float32
    assert size.node_state_bytes == 171_392  # φ's weights and buffers below `mid`, float32
    assert size.model_parameters == 174_778  # WRN-16-1
    assert (size.activation_values, size.largest_activation) == (331_786, 16 * 32 * 32)  # every layer, the largest
    assert (size.batch_size, size.eval_batch_size) == (64, 64)
    assert size.feature_bytes_per_sample == 32 * 16 * 16 * 2  # its `mid` output, float16


@pytest.mark.parametrize("run", recorded_runs(), ids=lambda run: run.source)
def test_estimate_is_within_a_fifth_of_every_measured_peak(run: RecordedRun) -> None:
    """Every simulation measured on this code (cost-model grid, scale runs, default runs): the estimate lies within
    0.8× to 1.2× of its peak PSS (0.85× to 1.18× when the constants were fitted)."""
    assert 0.8 < run.estimate_gib() / run.peak_gib < 1.2


def test_every_dataset_has_its_image_counts() -> None:
    """The estimate reads each dataset's image counts from the catalogue."""
    assert all(info.train_samples > 0 and info.test_samples > 0 for info in DATASETS.values())
    for name in ("fashion-mnist-mini", "synthetic"):  # the ones every machine can load
        splits = load_dataset(name)
        assert (len(splits.train.labels), len(splits.test.labels)) == (
            DATASETS[name].train_samples,
            DATASETS[name].test_samples,
        )
