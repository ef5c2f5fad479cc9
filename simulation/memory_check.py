"""Refuse, before Ray starts, a simulation whose estimated peak memory exceeds what this machine has available.

The estimate (``simulation.memory_estimate``) is compared with ``MemAvailable`` from /proc/meminfo, or what the
cgroup's ``memory.max`` leaves when that is lower. ``FEDFT_MEMORY_AVAILABLE_MB`` replaces the measured figure: set
it above the estimate to run anyway (memory that other jobs will free, a swap file), or low to see the refusal.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from models import SplitModel
from models.outputs import eval_mode, feature_map_shapes
from run_config import ConfigError, RunConfig, build_model_for, dataset_info
from server_app.pretraining import BATCHNORM_BATCH_SIZE, cache_path
from simulation.memory_estimate import MIB, MemoryEstimate, SimulationSize, actors_at_once, estimate_peak
from strategies.central_evaluation import MAX_CACHED_FEATURES_BYTES
from strategies.partial_model import split_state
from strategies.random_selection import cohort_size

#: Megabytes of memory the check takes as available instead of measuring it.
AVAILABLE_ENV = "FEDFT_MEMORY_AVAILABLE_MB"
LABEL_BYTES = 8
GIB = 2**30


def available_from(meminfo: str, cgroup_max: str | None, cgroup_current: str | None) -> int:
    """Bytes available to new processes: /proc/meminfo's ``MemAvailable``, or the cgroup's headroom
    (``memory.max`` − ``memory.current``) when a limit is set and lower."""
    available = next(int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemAvailable:"))
    if cgroup_max and cgroup_current and cgroup_max.strip() != "max":
        available = min(available, int(cgroup_max) - int(cgroup_current))
    return available


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def machine_available_bytes() -> int:
    """The memory this machine has available now, or ``FEDFT_MEMORY_AVAILABLE_MB`` when set."""
    override = os.environ.get(AVAILABLE_ENV)
    if override:
        try:
            return int(float(override) * MIB)
        except ValueError:
            raise ConfigError(f"{AVAILABLE_ENV}={override!r} is not a number of megabytes") from None
    return available_from(
        Path("/proc/meminfo").read_text(), _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    )


def frozen_feature_values(config: RunConfig, model: SplitModel) -> int:
    """Values of one image's frozen features φ(x) (0 when the whole model trains)."""
    if config.freeze == "none":
        return 0
    shape = feature_map_shapes(model, dataset_info(config).input_shape, [config.freeze])
    return math.prod(shape[config.freeze])


def feature_bytes_per_sample(config: RunConfig, feature_values: int) -> int:
    """Bytes of the frozen features a client caches per image (0 when it trains the whole model or caches none)."""
    if not config.feature_cache:
        return 0
    return feature_values * (2 if config.feature_cache_dtype == "float16" else 4)


def server_feature_bytes(feature_values: int, test_samples: int) -> int:
    """Bytes of the test set's frozen features (float32) the server's central evaluation keeps; 0 when it keeps
    the images instead (no frozen part, or features over its cap)."""
    size = feature_values * 4 * test_samples
    return size if size <= MAX_CACHED_FEATURES_BYTES else 0


def activation_values(model: SplitModel, input_shape: tuple[int, int, int]) -> tuple[int, int]:
    """Values every layer of ``model`` outputs for one image, in all and for its largest output (one forward)."""
    sizes: list[int] = []
    leaves = [module for module in model.modules() if not list(module.children())]
    hooks = [leaf.register_forward_hook(lambda module, args, out: sizes.append(out.numel())) for leaf in leaves]
    try:
        with torch.no_grad(), eval_mode(model):
            model(torch.zeros(1, *input_shape))
    finally:
        for hook in hooks:
            hook.remove()
    return sum(sizes), max(sizes)


def frozen_part_bytes(config: RunConfig, model: SplitModel) -> int:
    """Bytes of φ's weights and buffers, which every client that trained keeps in its context (0 without φ)."""
    if config.freeze == "none":
        return 0
    frozen, _ = split_state(model.state_dict(), model.upper_state_keys(config.freeze))
    return sum(t.numel() * t.element_size() for t in frozen.values())


def pretrain_samples(config: RunConfig) -> int:
    """Images the server pretrains on when its weights are not cached (at most ``pretrain-samples``): 0 without
    pretraining or from a checkpoint."""
    if config.pretrain in ("none", "checkpoint"):
        return 0
    if config.pretrain == "dataset":
        source = dataset_info(config, config.pretrain_dataset).train_samples
    else:
        train = dataset_info(config).train_samples
        source = train - round(train * (1 - config.public_fraction))
    return min(source, config.pretrain_samples) if config.pretrain_samples else source


def pretrain_source_bytes(config: RunConfig) -> int:
    """Bytes of the decoded source dataset ``pretrain = "dataset"`` loads besides the run's own (0 otherwise)."""
    if config.pretrain != "dataset":
        return 0
    info = dataset_info(config, config.pretrain_dataset)
    height, width = info.image_size
    return (info.train_samples + info.test_samples) * (info.channels * height * width + LABEL_BYTES)


def simulation_size(
    config: RunConfig, num_supernodes: int, concurrent_clients: int, pretrains: bool | None = None
) -> SimulationSize:
    """What ``estimate_peak`` needs, from the run config and the population (builds the model once). ``pretrains``
    says whether the server pretrains during the run (None: it does unless the weights are cached)."""
    if pretrains is None:
        pretrains = not cache_path(config).is_file()
    info = dataset_info(config)
    train, test = info.train_samples, info.test_samples
    model = build_model_for(config)
    activations, largest = activation_values(model, info.input_shape)
    feature_values = frozen_feature_values(config, model)
    height, width = info.image_size
    return SimulationSize(
        num_supernodes=num_supernodes,
        clients_per_round=cohort_size(num_supernodes, config.fraction_train),
        concurrent_clients=concurrent_clients,
        rounds=config.num_server_rounds,
        dataset_bytes=(train + test) * (info.channels * height * width + LABEL_BYTES),
        client_samples=round(train * (1 - config.public_fraction)),
        test_samples=test,
        sample_values=math.prod(info.input_shape),
        model_parameters=sum(p.numel() for p in model.parameters()),
        activation_values=activations,
        largest_activation=largest,
        batch_size=config.batch_size,
        eval_batch_size=config.eval_batch_size,
        feature_bytes_per_sample=feature_bytes_per_sample(config, feature_values),
        feature_cache_cap_bytes=config.feature_cache_mb * MIB,
        features_shared=bool(config.feature_cache_dir),
        server_feature_bytes=server_feature_bytes(feature_values, test),
        node_state_bytes=frozen_part_bytes(config, model),
        pretrain_samples=pretrain_samples(config) if pretrains else 0,
        pretrain_source_bytes=pretrain_source_bytes(config) if pretrains else 0,
        pretrain_batchnorm_batch_size=BATCHNORM_BATCH_SIZE,
    )


def refusal(size: SimulationSize, estimate: MemoryEstimate, available: int) -> str | None:
    """The one-line refusal when the estimate exceeds ``available`` bytes, naming what to change; else None."""
    if estimate.total <= available:
        return None
    actor = estimate.clients / size.concurrent_clients
    apps = "ClientApp" if size.concurrent_clients == 1 else "ClientApps"
    fewer = ", or raise --cpus-per-client to run fewer ClientApps at once" if size.concurrent_clients > 1 else ""
    return (
        f"this simulation needs about {estimate.total / GIB:.1f} GiB at its peak but {available / GIB:.1f} GiB of "
        f"memory is available ({size.num_supernodes:,} clients, {size.clients_per_round} per round, "
        f"{size.concurrent_clients} {apps} at once of about {actor / GIB:.2f} GiB each; the server "
        f"{estimate.server / GIB:.2f} GiB, the clients' contexts {estimate.per_node / GIB:.2f} GiB, Flower and "
        f"Ray {estimate.platform / GIB:.2f} GiB): lower --num-supernodes (NUM_SUPERNODES) or run config "
        f"'fraction-train'{fewer}; {AVAILABLE_ENV} replaces the available figure"
    )


def check_memory(config: RunConfig, num_supernodes: int, cpus_per_client: int, gpus_per_client: float = 0.0) -> None:
    """ConfigError with the estimate when this machine cannot hold the simulation."""
    gpus = torch.cuda.device_count() if gpus_per_client > 0 else 0
    actors = actors_at_once(os.cpu_count() or 1, cpus_per_client, gpus, gpus_per_client)
    size = simulation_size(config, num_supernodes, max(actors, 1))
    problem = refusal(size, estimate_peak(size), machine_available_bytes())
    if problem:
        raise ConfigError(problem)
