"""Every setting of the app: its type, the values it allows and what it means.

Defaults live in one place only, ``[tool.flwr.app.config]`` in pyproject.toml; Flower fills
``context.run_config`` from it and from ``--run-config``. ``parse_run_config`` checks that mapping once,
at the start of a run, and returns a frozen ``RunConfig``; invalid values raise ``ConfigError`` naming
the key and what is allowed.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from data.catalog import DATASET_NAMES
from models.device import DEVICE_NAMES_HELP, is_device_name
from models.registry import MODEL_NAMES_HELP, parse_model_name
from run_config.fail_partitions import parse_fail_partitions
from run_config.paths import path_problem, required_path_problem, run_name_problem
from run_config.presets import METHODS, resolve_presets
from strategies.robust_aggregation import AGGREGATION_RULES, MAX_TRIM_FRACTION


class ConfigError(ValueError):
    """A run-config value is missing, of the wrong type or out of range."""


Check = Callable[[Any], str | None]  # returns why the value is invalid, or None


def _one_of(*allowed: str) -> Check:
    return lambda v: None if v in allowed else f"must be one of {', '.join(repr(a) for a in allowed)}"


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _fraction_or_zero(v: float) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def _open_fraction(v: float) -> str | None:
    return None if 0 < v < 1 else "must be in (0, 1)"


def _below_one(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"


def _below_half(v: float) -> str | None:
    return None if 0 <= v < MAX_TRIM_FRACTION else f"must be in [0, {MAX_TRIM_FRACTION})"


def _fault_list(v: str) -> str | None:
    try:
        parse_fail_partitions(v)
    except ValueError as err:
        return f"lists 'partition:mode' pairs separated by commas: {err}"
    return None


def _device(v: str) -> str | None:
    return None if is_device_name(v) else f"must be {DEVICE_NAMES_HELP}"


def _model(v: str) -> str | None:
    try:
        parse_model_name(v)
    except ValueError:
        return f"must be {MODEL_NAMES_HELP}"
    return None


@dataclass(frozen=True)
class Setting:
    """One key of ``[tool.flwr.app.config]``; ``auto`` keys may be ``"auto"`` (set by the method preset)."""

    key: str
    type: type
    help: str
    check: Check | None = None
    auto: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("method", str, "Method preset (see Methods): sets the `auto` keys below.", _one_of(*METHODS)),
    Setting("freeze", str, "Split level: φ up to it is frozen, θ above it is trained and sent (`none` = full model).", _one_of("none", "low", "mid", "up"), auto=True),
    Setting("data-selection", str, "Client data each round: `all`, `random` (new subset each round) or `entropy` (highest hardened-softmax entropy).", _one_of("all", "random", "entropy"), auto=True),
    Setting("selection-fraction", float, "P_ds: share of local samples trained on with `random`/`entropy` (at least one).", _fraction, auto=True),
    Setting("temperature", float, "ρ of the hardened softmax for entropy ranking (< 1 hardens).", _positive),
    Setting("proximal-mu", float, "FedProx μ: adds μ/2·‖w − w_t‖² on the trained parameters (0 = off).", _non_negative, auto=True),
    Setting("pretrain", str, "Initial weights: `public` (pretrain on the server's held-out split), `dataset` (on `pretrain-dataset`), `checkpoint` (`pretrain-checkpoint`) or `none`.", _one_of("public", "dataset", "checkpoint", "none")),
    Setting("pretrain-dataset", str, "Source dataset for `pretrain = \"dataset\"` (its whole training set; the classifier is re-initialised).", _one_of(*DATASET_NAMES)),
    Setting("pretrain-checkpoint", str, "State-dict file for `pretrain = \"checkpoint\"`: any path without control "
            "characters.", path_problem),
    Setting("pretrain-epochs", int, "Server pretraining epochs.", _positive),
    Setting("pretrain-learning-rate", float, "Server pretraining SGD learning rate (momentum 0.9, weight decay 5e-4, batch `batch-size`).", _positive),
    Setting("pretrain-cache-dir", str, "Where pretrained weights are cached: any folder without control characters; "
            "empty = `~/.cache/fedft/pretrained`.", path_problem),
    Setting("feature-cache", bool, "Clients keep φ(x) of their data across rounds instead of recomputing it."),
    Setting("feature-cache-mb", int, "Per-process memory cap of the feature cache (least recently used clients are evicted; features over the cap stream from `feature-cache-dir` a chunk at a time). A SuperNode's node config may set its own.", _positive),
    Setting("feature-cache-dtype", str, "How cached features are stored: `float16` (half the memory; selections and accuracy checked equal to `float32` in the tests) or `float32`.", _one_of("float16", "float32")),
    Setting("feature-cache-dir", str, "Folder where cached features also go, so they outlive the process (a deployed "
            "SuperNode runs each round in a new one): any folder without control characters; empty = memory only.",
            path_problem),
    Setting("dataset", str, f"Dataset: {', '.join(DATASET_NAMES)} (see Data).", _one_of(*DATASET_NAMES)),
    Setting("data-dir", str, "Folder holding the dataset files (any folder without control characters); empty searches "
            "the well-known places; `hub` downloads from Hugging Face (needs internet).", path_problem),
    Setting("model", str, f"Model: {MODEL_NAMES_HELP}.", _model),
    Setting("dropout", float, "Dropout inside WRN blocks.", _below_one),
    Setting("partitioner", str, "How training data is split over clients.", _one_of("dirichlet", "pathological", "iid")),
    Setting("dirichlet-alpha", float, "Dirichlet concentration α (0.1 strong, 0.5 weak heterogeneity).", _positive),
    Setting("min-partition-size", int, "Dirichlet: re-draw until every client holds at least this many samples.", _non_negative),
    Setting("self-balancing", bool, "Dirichlet: stop giving a class to a client holding ≥ N_total/N samples (thesis rule)."),
    Setting("classes-per-client", int, "Pathological (#C=k): labels per client.", _positive),
    Setting("public-fraction", float, "Share of the training set held out on the server (never given to clients).", _below_one),
    Setting("seed", int, "Seed for partitions, model initialisation, cohorts and local training.", _non_negative),
    Setting("num-server-rounds", int, "Federated rounds.", _positive),
    Setting("client-selection", str, "How each round's cohort is chosen: `random` or `fedentopt` (maximal label entropy).", _one_of("random", "fedentopt")),
    Setting("fedentopt-buffer", float, "FedEntOpt's FIFO buffer Q as a share of the clients (needs 0 < Q ≤ K − M).", _open_fraction),
    Setting("label-dp-epsilon", float, "ε of the Laplace noise clients add to their label counts (0 = exact counts).", _non_negative),
    Setting("lr-decay", float, "Learning-rate factor per round: round t uses learning-rate · lr-decay^(t−1).", _fraction),
    Setting("fraction-train", float, "Share of the clients that train each round.", _fraction),
    Setting("straggler-fraction", float, "Share of each round's selected clients that drop out (redrawn every round, seeded); they get no work and are listed as `dropped`.", _below_one),
    Setting("fraction-evaluate", float, "Share of the clients that evaluate the global model on their local data each round (0 = off).", _fraction_or_zero),
    Setting("local-epochs", int, "Local epochs E per round.", _positive),
    Setting("batch-size", int, "Local mini-batch size.", _positive),
    Setting("learning-rate", float, "Local SGD learning rate.", _positive),
    Setting("momentum", float, "Local SGD momentum.", _below_one),
    Setting("weight-decay", float, "Local SGD weight decay.", _non_negative),
    Setting("augment", bool, "Random crop (pad 4) and horizontal flip during local training (the papers use none)."),
    Setting("device", str, f"Where clients compute: {DEVICE_NAMES_HELP}; a SuperNode's node config may set its own. A device the node lacks is an error, never a fall-back to the CPU.", _device),
    Setting("server-device", str, f"Where the server pretrains, evaluates every round and runs the centralised baseline: {DEVICE_NAMES_HELP}.", _device),
    Setting("client-threads", int, "Torch threads per ClientApp; 0 = the CPUs Ray gave the client in simulation, all cores on a device.", _non_negative),
    Setting("eval-batch-size", int, "Batch size of forward-only passes (evaluation, the entropy pass, building the feature cache); lower bounds a small node's memory. A SuperNode's node config may set its own.", _positive),
    Setting("round-timeout", float, "Seconds the server waits for a round's replies; later replies are dropped.", _positive),
    Setting("min-train-nodes", int, "Sound updates a round needs to be aggregated; with fewer the round is skipped and the global model kept.", _positive),
    Setting("aggregation", str, "How accepted updates are combined (see Reliability): `clipped-mean` (each update's norm clipped to `clip-multiple` × the round's median, weights capped at `weight-cap-multiple` × the median), `mean` (plain FedAvg, as in the papers), `median`, `trimmed-mean`, `krum`, `multi-krum` or `bulyan`.", _one_of(*AGGREGATION_RULES)),
    Setting("clip-multiple", float, "`clipped-mean`: each client's update Δ = θ_k − θ is clipped to this multiple of the round's median ‖Δ‖₂.", _positive),
    Setting("weight-cap-multiple", float, "`clipped-mean`, `multi-krum`: each client's weight (`num-examples`) is capped at this multiple of the round's median weight.", _positive),
    Setting("trim-fraction", float, "`trimmed-mean`: share of the clients' values cut from each end, per coordinate; it must cut at least one client per round.", _below_half),
    Setting("byzantine-clients", int, "`krum`, `multi-krum`, `bulyan`: f, the hostile clients per round to withstand (Krum needs ≥ 2f + 3 clients per round, Bulyan ≥ 4f + 3; Multi-Krum keeps n − f).", _non_negative),
    Setting("resume", bool, "Go on from the checkpoint in `<results-dir>/<run-name>/` (needs a `run-name`); without one the run starts afresh."),
    Setting("fail-partitions", str, "Testing only: `partition:mode` pairs make those clients fail or attack every round: `raise`, `hang`, `garbage` (NaN arrays), `scale100` (update ×100), `signflip10` (update ×−10), `huge` (values 1e20), `inflate` (`num-examples` ×1000, update ×−1), `gaussian` (random update of the honest norm), `labelflip` (trains on label C−1−y); e.g. `\"2:raise,5:scale100\"`.", _fault_list),
    Setting("node-wait-seconds", float, "Seconds the server waits for all clients to connect before round 1.", _non_negative),
    Setting("results-dir", str, "Folder for run results: any folder without control characters, not empty; a relative "
            "path is taken from the SuperLink's working folder (the project folder under `make run`). Runs write only "
            "inside it.", required_path_problem),
    Setting("run-name", str, "Results sub-folder `<results-dir>/<run-name>`, one folder name (letters, digits, "
            "`-`, `_`, `.`, `=`, `+`; not starting with `.`; at most 255 characters); empty makes one from method, "
            "dataset and time. A run is refused while another run writes the folder, and, without `resume = true`, "
            "when it holds an earlier run.", run_name_problem),
)

#: What a setting meant before it existed: results and checkpoints recorded earlier hold no value for it, and behave
#: as if they had this one (before robust aggregation every run took FedAvg's mean; the feature cache held float32).
IMPLIED_BEFORE_IT_EXISTED: dict[str, Any] = {
    "aggregation": "mean", "clip-multiple": 1.0, "weight-cap-multiple": 1.0, "trim-fraction": 0.2,
    "byzantine-clients": 1, "feature-cache-dtype": "float32", "server-device": "auto",
}


def recorded_value(recorded: Mapping[str, Any], key: str) -> Any:
    """The value of ``key`` in a configuration recorded by an earlier version (None if it cannot be known)."""
    return recorded[key] if key in recorded else IMPLIED_BEFORE_IT_EXISTED.get(key)


def unknown_key_message(key: str, known: Iterable[str]) -> str:
    """``'temprature' is not a run-config key; did you mean 'temperature'?``"""
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else "README › Configuration lists every key"
    return f"'{key}' is not a run-config key; {hint}"


def _attr(key: str) -> str:
    return key.replace("-", "_")


@dataclass(frozen=True)
class RunConfig:
    """The validated run configuration, presets resolved, with attribute names in snake_case."""

    method: str
    freeze: str
    data_selection: str
    selection_fraction: float
    temperature: float
    proximal_mu: float
    pretrain: str
    pretrain_dataset: str
    pretrain_checkpoint: str
    pretrain_epochs: int
    pretrain_learning_rate: float
    pretrain_cache_dir: str
    feature_cache: bool
    feature_cache_mb: int
    feature_cache_dtype: str
    feature_cache_dir: str
    dataset: str
    data_dir: str
    model: str
    dropout: float
    partitioner: str
    dirichlet_alpha: float
    min_partition_size: int
    self_balancing: bool
    classes_per_client: int
    public_fraction: float
    seed: int
    num_server_rounds: int
    client_selection: str
    fedentopt_buffer: float
    label_dp_epsilon: float
    lr_decay: float
    fraction_train: float
    straggler_fraction: float
    fraction_evaluate: float
    local_epochs: int
    batch_size: int
    learning_rate: float
    momentum: float
    weight_decay: float
    augment: bool
    device: str
    server_device: str
    client_threads: int
    eval_batch_size: int
    round_timeout: float
    min_train_nodes: int
    aggregation: str
    clip_multiple: float
    weight_cap_multiple: float
    trim_fraction: float
    byzantine_clients: int
    resume: bool
    fail_partitions: str
    node_wait_seconds: float
    results_dir: str
    run_name: str

    def to_dict(self) -> dict[str, Any]:
        """The configuration with its original kebab-case keys."""
        return {s.key: getattr(self, _attr(s.key)) for s in SETTINGS}


def _coerce(setting: Setting, value: Any) -> Any:
    """Accept the value if it has the setting's type (ints are fine for floats); else raise."""
    expected = setting.type
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if expected is not bool and isinstance(value, bool) or not isinstance(value, expected):
        allowed = f'{expected.__name__} or "auto"' if setting.auto else expected.__name__
        raise ConfigError(f"run config '{setting.key}' must be of type {allowed}, got {type(value).__name__} {value!r}")
    if expected is float and not math.isfinite(value):
        raise ConfigError(f"run config '{setting.key}' must be a finite number, got {value!r}")
    return value


def parse_run_config(run_config: Mapping[str, Any]) -> RunConfig:
    """Validate Flower's ``context.run_config`` and return a ``RunConfig``; raise ``ConfigError``."""
    missing = [s.key for s in SETTINGS if s.key not in run_config]
    if missing:
        raise ConfigError(f"run config '{missing[0]}' is missing; add it to [tool.flwr.app.config]")
    method = run_config["method"]
    if method not in METHODS:
        raise ConfigError(f"run config 'method' = {method!r} is invalid: it must be one of {', '.join(METHODS)}")
    resolved = resolve_presets({s.key: run_config[s.key] for s in SETTINGS})
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        value = _coerce(setting, resolved[setting.key])
        problem = setting.check(value) if setting.check else None
        if problem:
            raise ConfigError(f"run config '{setting.key}' = {value!r} is invalid: it {problem}")
        values[_attr(setting.key)] = value
    if values["resume"] and not values["run_name"]:
        raise ConfigError("run config 'resume' = true needs a 'run-name': the run folder holding the checkpoint")
    return RunConfig(**values)
