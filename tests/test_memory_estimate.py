"""The start-time memory estimate: its arithmetic on fixed numbers, the available-memory reading, the refusal's
wording, and its distance from the peaks measured by ``python -m benchmarks scale``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.scale import RecordedRun, _least_worst_base, fit, recorded_runs
from data.catalog import DATASETS
from data.loading import load_dataset
from methods.registry import config_with_overrides
from run_config import ConfigError
from server_app.pretraining import cache_path
from simulation import memory_check
from simulation.memory_check import available_from, check_memory, refusal, simulation_size
from simulation.memory_estimate import (
    FITTED,
    MIB,
    NODE_BYTES,
    FittedConstants,
    MemoryEstimate,
    SimulationSize,
    actors_at_once,
    clients_served,
    clients_trained,
    estimate_peak,
)

GIB = 2**30
#: Constants of round size for the arithmetic tests (the fitted ones change when the runs are measured again).
CONSTANTS = FittedConstants(
    platform_bytes=700 * MIB,
    actor_bytes=200 * MIB,
    server_bytes=300 * MIB,
    client_data_copies=10,
    training_activation_copies=3,
    forward_activation_copies=4,
    reply_copies=2,
)
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
    features_shared=False,
    server_feature_bytes=80_000_000,
    node_state_bytes=200_000,
)


def test_estimate_adds_each_part_from_the_numbers() -> None:
    estimate = estimate_peak(SIZE, CONSTANTS)
    # 48 images a client; 30 trainings over 1,000 clients and 2 actors: each actor serves 14.9 distinct clients,
    # caching 48 × 16 KiB of features for each.
    served = 1000 * (1 - (1 - 1 / 2000) ** 30)
    assert round(served, 2) == 14.89
    forward = 4 * 500 * 16_000 * 4  # an evaluation batch through the largest layer
    training = 3 * 64 * 300_000 * 4  # a training batch's activations, kept for the backward pass, and their gradients
    data = 10 * 48 * 1024 * 4
    actor = 200 * MIB + 5 * 400_000 + training + forward + data + round(served * 48 * 16_384)
    # The test set's φ(x) is written batch by batch into one tensor: counted once.
    server = 300 * MIB + (3 + 2 * 10) * 400_000 + forward + 10_000 * 1024 * 4 + 80_000_000
    # 29.7 distinct clients trained in 3 rounds of 10 of 1,000, each keeping 200,000 bytes of φ in its context.
    contexts = 1000 * NODE_BYTES + 5_940_200
    assert estimate == MemoryEstimate(700 * MIB, contexts, server, 2 * actor, 55_000_000)
    assert estimate.total == 700 * MIB + contexts + server + 2 * actor + 55_000_000


def test_feature_cache_counts_at_most_its_cap() -> None:
    capped = estimate_peak(
        SimulationSize(**{**vars(SIZE), "num_supernodes": 10, "feature_cache_cap_bytes": 100 * MIB}), CONSTANTS
    )
    # 7.9 clients × 4,800 images × 16 KiB > 100 MiB
    actor = 200 * MIB + 5 * 400_000 + 3 * 64 * 300_000 * 4 + 4 * 500 * 16_000 * 4 + 10 * 4800 * 1024 * 4 + 100 * MIB
    assert capped.clients == 2 * actor


def test_features_mapped_from_shared_files_count_once_for_every_client_that_trained() -> None:
    private = estimate_peak(SIZE, CONSTANTS)
    shared = estimate_peak(SimulationSize(**{**vars(SIZE), "features_shared": True}), CONSTANTS)
    served = 1000 * (1 - (1 - 1 / 2000) ** 30)  # distinct clients per actor, each keeping its own copy
    trained = 1000 * (1 - (1 - 10 / 1000) ** 3)  # distinct clients over the run, one mapped copy each
    assert private.clients - shared.clients == 2 * round(served * 48 * 16_384) - round(trained * 48 * 16_384)
    capped = estimate_peak(
        SimulationSize(**{**vars(SIZE), "features_shared": True, "feature_cache_cap_bytes": 100_000}), CONSTANTS
    )
    assert private.clients - capped.clients == 2 * round(served * 48 * 16_384) - 2 * 100_000  # a cap per actor


def test_pretraining_in_the_run_adds_its_images_model_batch_and_batchnorm_pass_to_the_server() -> None:
    pretraining = SimulationSize(**{**vars(SIZE), "pretrain_samples": 1200, "pretrain_batchnorm_batch_size": 500})
    added = estimate_peak(pretraining, CONSTANTS).server - estimate_peak(SIZE, CONSTANTS).server
    # 4 models (trained, gradients, momentum, target), a training batch, a BatchNorm batch of 500, and the images
    # twice (all, and the training and validation slices indexed from them).
    assert added == 4 * 400_000 + 3 * 64 * 300_000 * 4 + 4 * 500 * 16_000 * 4 + 2 * 1200 * 1024 * 4
    from_source = SimulationSize(**{**vars(pretraining), "pretrain_source_bytes": 55_000_000})
    assert estimate_peak(from_source, CONSTANTS).server - estimate_peak(pretraining, CONSTANTS).server == 55_000_000


@pytest.mark.parametrize(
    ("overrides", "samples", "source_bytes"),
    [
        ("", 6000, 70_000 * (28 * 28 + 8)),  # 6,000 of MNIST's images, the whole decoded MNIST besides the run's
        ("pretrain='public'", 1200, 0),  # the public 20% of fashion-mnist-mini's 6,000, part of the run's own data
        ("pretrain='dataset' pretrain-dataset='fashion-mnist' pretrain-samples=0", 60_000, 70_000 * (28 * 28 + 8)),
        ("pretrain='checkpoint'", 0, 0),
        ("pretrain='none'", 0, 0),
    ],
)
def test_what_pretraining_loads_in_each_mode(overrides: str, samples: int, source_bytes: int) -> None:
    size = simulation_size(config_with_overrides(overrides), 10, 2, pretrains=True)
    assert (size.pretrain_samples, size.pretrain_source_bytes) == (samples, source_bytes)
    assert simulation_size(config_with_overrides(overrides), 10, 2, pretrains=False).pretrain_samples == 0


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
    assert size.features_shared  # mapped from the files of `feature-cache-dir`
    assert simulation_size(config_with_overrides(""), 10, 2, pretrains=True).pretrain_batchnorm_batch_size == 500


@pytest.mark.parametrize("run", recorded_runs(), ids=lambda run: run.source)
def test_estimate_is_within_a_fifth_of_every_measured_peak(run: RecordedRun) -> None:
    """Every simulation measured on this code (cost-model grid, scale runs, default runs): the estimate lies within
    0.8× to 1.2× of its peak PSS (0.89× to 1.14× when the constants were fitted)."""
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


def _best_base(parts_mib: list[float], measured_mib: list[float]) -> int:
    base, with_base = _least_worst_base(np.array(parts_mib) * MIB, np.array(measured_mib) * MIB)
    assert list(with_base) == [part * MIB + base for part in parts_mib]
    return base


def test_the_base_brings_each_part_closest_to_its_measurement() -> None:
    assert _best_base([100, 200], [150, 250]) == 50 * MIB  # both exact
    # No base fits both; the least worst makes the two ratios reciprocal (base 41.4 MiB), 40 on the 10 MiB grid:
    # ratios 1.4 and 0.7, |log| 0.34 and 0.36 (30 MiB: 0.26 and 0.43; 50 MiB: 0.41 and 0.29).
    assert _best_base([100, 100], [100, 200]) == 40 * MIB


def test_the_fitted_constants_are_what_the_fit_derives_from_the_recorded_runs() -> None:
    assert fit(recorded_runs()) == FITTED


def test_pretraining_is_counted_unless_its_weights_are_cached(tmp_path: Path) -> None:
    config = config_with_overrides(f"pretrain-cache-dir='{tmp_path}'")
    assert simulation_size(config, 10, 2).pretrain_samples == 6000
    cache_path(config).write_bytes(b"weights")
    assert simulation_size(config, 10, 2).pretrain_samples == 0
