"""Every core setting of the app, declared once: key, type, default, help and check (``run_config.settings``).

Flower fills ``context.run_config`` from ``[tool.flwr.app.config]`` (written from these declarations) and
``--run-config``. ``parse_run_config`` checks that mapping once, at the start of a run, and returns a frozen
``RunConfig``: the method's presets fill the ``"auto"`` axes, every value is checked (a bad one raises
``ConfigError`` naming the key and what is allowed), and every method's own settings are parsed too
(``RunConfig.settings(SomeMethodSettings)``).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from data.catalog import DATASET_NAMES
from models.device import DEVICE_NAMES_HELP, is_device_name
from models.registry import MODEL_NAMES_HELP, parse_model_name
from run_config.choices import AGGREGATION_RULES, MAX_TRIM_FRACTION, STRAGGLER_MODES, STRAGGLER_WORK
from run_config.fail_partitions import parse_fail_partitions
from run_config.paths import path_problem, required_path_problem, run_name_problem
from run_config.settings import (
    AUTO,
    ConfigError,
    Setting,
    below_one,
    declared_settings,
    fraction,
    fraction_or_zero,
    non_negative,
    one_of,
    open_fraction,
    positive,
    setting,
)

T = TypeVar("T")

__all__ = ["ConfigError", "RunConfig", "Setting"]


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


def _dataset(v: str) -> str | None:
    if v in DATASET_NAMES or (v.startswith(("/", "~")) and path_problem(v) is None):
        return None
    return (
        f"must be one of {', '.join(repr(n) for n in DATASET_NAMES)}, or the absolute path of your own data (a folder "
        "of images, one sub-folder per class, or a Hugging Face dataset saved with save_to_disk)"
    )


def _column(v: str) -> str | None:
    return "must name a column, not be empty" if not v.strip() else path_problem(v)


def _module_name(v: str) -> str | None:
    return (
        None if re.fullmatch(r"[\w.]*", v) else "must be a module's name as `named_modules()` gives it, e.g. features.3"
    )


@dataclass(frozen=True)
class RunConfig:
    """The validated run configuration, presets resolved, with attribute names in snake_case."""

    # What runs: the method and its composable axes ("auto": the method's preset).
    method: str = setting("fedft-eds", "Method (see Methods): sets the `auto` keys below.")
    freeze: str = setting(
        AUTO,
        "Split level: φ up to it is frozen, θ above it is trained and sent (`none` = full model).",
        one_of("none", "low", "mid", "up"),
        auto=True,
    )
    data_selection: str = setting(
        AUTO,
        "Client data each round: `all`, `random` (new subset each round) or "
        "`entropy` (highest hardened-softmax entropy).",
        one_of("all", "random", "entropy"),
        auto=True,
    )
    selection_fraction: float = setting(
        AUTO, "P_ds: share of local samples trained on with `random`/`entropy` (at least one).", fraction, auto=True
    )
    objective: str = setting(
        AUTO,
        "Local objective: `plain` (cross-entropy) or one a method brings, e.g. `proximal` (FedProx).",
        auto=True,
    )
    temperature: float = setting(0.1, "ρ of the hardened softmax for entropy ranking (< 1 hardens).", positive)
    entropy_metrics: bool = setting(
        False,
        "Report the hardened entropy of the local samples (`selected_entropy_mean`, `local_entropy_mean` in "
        "`client_stats`) also where `data-selection` does not need it (`all`, `random`): a forward pass over all "
        "local data every round, left out unless asked for.",
    )
    # Pretraining.
    pretrain: str = setting(
        AUTO,
        "Initial weights: `public` (pretrain on the server's held-out split), `dataset` "
        "(on `pretrain-dataset`), `checkpoint` (`pretrain-checkpoint`) or `none`; `auto`: the method's, `dataset` "
        "but for methods whose papers start from random weights (`kafal`: `none`).",
        one_of("public", "dataset", "checkpoint", "none"),
        auto=True,
    )
    pretrain_dataset: str = setting(
        "mnist",
        'Source dataset for `pretrain = "dataset"` (another domain than `dataset`, as the FedFT-EDS paper pretrains on '
        "Small ImageNet for CIFAR; the classifier is re-initialised for the task's classes): a catalogued name or "
        "your own data's absolute path, as `dataset`.",
        _dataset,
    )
    pretrain_checkpoint: str = setting(
        "",
        'State-dict file for `pretrain = "checkpoint"` (any path without control characters), checked against the '
        "model at start; a classifier of another number of classes is replaced by a new one (see Your own model).",
        path_problem,
    )
    pretrain_samples: int = setting(
        6000,
        "Images of the pretraining source the server trains on: a stratified, seeded draw of this many (0 = all).",
        non_negative,
    )
    pretrain_epochs: int = setting(10, "Server pretraining epochs.", positive)
    pretrain_batch_size: int = setting(64, "Server pretraining mini-batch size.", positive)
    pretrain_learning_rate: float = setting(
        0.05,
        "Server pretraining SGD peak learning rate (warm-up, then cosine "
        "decay; momentum 0.9, weight decay 5e-4, batch `pretrain-batch-size`).",
        positive,
    )
    pretrain_round: bool = setting(
        AUTO,
        "Step 2 of the pretraining phase (thesis §6.4.1, Alg. 6 line 1): a one-round FL in which every client trains "
        "the whole pretrained model on all its local data until its training loss stops improving "
        "(`pretrain-round-tolerance`, at most `pretrain-round-max-epochs`), with no deadline, and the server "
        "averages them by sample count into the model FL starts from (φ is frozen from it). `auto`: the method's "
        "(on for the FedFT family and its paper's baselines FedAvg, FedProx and their RDS variants, off for the "
        'others), off with `pretrain = "none"` (FedAvg w/o pretraining has neither step); `true` runs it from the '
        "model's own initialisation there (the round alone as the start).",
        auto=True,
    )
    pretrain_round_tolerance: float = setting(
        0.01,
        "The pretraining round's convergence rule: a client stops after the first epoch whose mean training loss is "
        "not at least this much (in nats) below the lowest of its earlier epochs.",
        positive,
    )
    pretrain_round_max_epochs: int = setting(
        20,
        "The pretraining round's cap on each client's epochs (it stops there even if its loss still falls).",
        positive,
    )
    pretrain_cache_dir: str = setting(
        "",
        "Where pretrained weights are cached: any folder without control "
        "characters; empty = `~/.cache/fedft/pretrained`.",
        path_problem,
    )
    # Frozen-feature cache.
    feature_cache: bool = setting(True, "Clients keep φ(x) of their data across rounds instead of recomputing it.")
    feature_cache_mb: int = setting(
        2048,
        "Per-process memory cap of the feature cache (least recently used clients "
        "are evicted; features over the cap stream from `feature-cache-dir` a "
        "chunk at a time). A SuperNode's node config may set its own.",
        positive,
        node=True,
    )
    feature_cache_dtype: str = setting(
        "float16",
        "How cached features are stored: `float16` (half the memory; "
        "selections checked equal to `float32` in the tests) or `float32`.",
        one_of("float16", "float32"),
    )
    feature_cache_dir: str = setting(
        "~/.cache/fedft/features",
        "Folder where cached features also go, so they "
        "outlive the process (a deployed SuperNode runs each round in a new one): any "
        "folder without control characters; empty = memory only.",
        path_problem,
    )
    # Data.
    data_cache_dir: str = setting(
        "~/.cache/fedft/arrays",
        "Folder where the processes of a machine share the decoded dataset and the split over the clients, "
        "computed once and memory-mapped (any folder without control characters); empty = every process "
        "decodes and splits the data in its own memory. A SuperNode's node config may set its own.",
        path_problem,
        node=True,
    )
    dataset: str = setting(
        "fashion-mnist-mini",
        f"Dataset: {', '.join(DATASET_NAMES)} (see Data), or the absolute path of your own (an image folder, one "
        "sub-folder per class, or a Hugging Face dataset saved with `save_to_disk`; see Your own data).",
        _dataset,
    )
    data_dir: str = setting(
        "",
        "Folder holding the dataset files (any folder without control characters); empty "
        "searches the well-known places; `hub` downloads from Hugging Face (needs internet).",
        path_problem,
    )
    image_column: str = setting(
        "image", "Your own data saved as a Hugging Face dataset: the column holding the images.", _column
    )
    label_column: str = setting(
        "label",
        "Your own data saved as a Hugging Face dataset: the column holding the labels (a `ClassLabel`, or any values: "
        "their distinct values, sorted, are the classes).",
        _column,
    )
    model: str = setting(
        AUTO,
        f"Model: {MODEL_NAMES_HELP}; `auto`: the method's, `wrn-16-1` (the FedFT-EDS paper's) but for KAFAL "
        "(`mlp-2nn`, its paper's model for 28×28 digits, Fig. 14).",
        _model,
        auto=True,
    )
    phi_end: str = setting(
        "",
        "A model given as `package.module:factory`: the module (its name in `named_modules()`) whose output ends φ, "
        "the part the FedFT family freezes; the model then splits there at the level `mid`. Empty: no split level "
        '(`freeze = "none"` only).',
        _module_name,
    )
    dropout: float = setting(0.3, "Dropout inside WRN blocks.", below_one)
    partitioner: str = setting(
        "dirichlet", "How training data is split over clients.", one_of("dirichlet", "pathological", "iid")
    )
    dirichlet_alpha: float = setting(0.1, "Dirichlet concentration α (0.1 strong, 0.5 weak heterogeneity).", positive)
    min_partition_size: int = setting(
        10, "Dirichlet: re-draw until every client holds at least this many samples.", non_negative
    )
    self_balancing: bool = setting(
        True, "Dirichlet: stop giving a class to a client holding ≥ N_total/N samples (thesis rule)."
    )
    classes_per_client: int = setting(2, "Pathological (#C=k): labels per client.", positive)
    public_fraction: float = setting(
        0.2,
        'Share of the training set held out on the server, never given to clients: what `pretrain = "public"` '
        "trains on and FedAT/FedKAD/FedMD draw their generic set from (0.2 of the default set: 1,200 images).",
        below_one,
    )
    seed: int = setting(0, "Seed for partitions, model initialisation, cohorts and local training.", non_negative)
    # Rounds and cohorts.
    num_server_rounds: int = setting(10, "Federated rounds.", positive)
    client_selection: str = setting(
        "random",
        "How each round's cohort is chosen: `random` or `fedentopt` (maximal label entropy).",
        one_of("random", "fedentopt"),
    )
    fedentopt_buffer: float = setting(
        0.5, "FedEntOpt's FIFO buffer Q as a share of the clients (needs 0 < Q ≤ K − M).", open_fraction
    )
    label_dp_epsilon: float = setting(
        0.0, "ε of the Laplace noise clients add to their label counts (0 = exact counts).", non_negative
    )
    lr_decay: float = setting(
        1.0, "Learning-rate factor per round: round t uses learning-rate · lr-decay^(t−1).", fraction
    )
    fraction_train: float = setting(
        AUTO,
        "Share of the clients that train each round (`auto`: the method's preset, 1 unless it has stragglers; "
        "the FedFSC family's f_n).",
        fraction,
        auto=True,
    )
    straggler_fraction: float = setting(
        0.0,
        "Share of each round's selected clients that drop out (redrawn every "
        "round, seeded); they get no work and are listed as `dropped`.",
        below_one,
    )
    straggler_mode: str = setting(
        "redraw",
        "Who straggles: `redraw` (a new share of each round's cohort) or `constant` (one fixed set of "
        "round(`straggler-fraction` · K) clients straggles in every round, as the thesis's Ch. 5 baselines).",
        one_of(*STRAGGLER_MODES),
    )
    straggler_work: str = setting(
        "none",
        "What stragglers do: `none` (get no work, listed as `dropped`) or `partial` (deliver after a random 1..E "
        'local epochs each round: FedProx+ with `method = "fedprox"`).',
        one_of(*STRAGGLER_WORK),
    )
    evaluate_every: int = setting(
        1,
        "Central evaluation of the global model every this many rounds, and always in the last round; the rounds "
        "between record no accuracy (null in rounds.jsonl). 1 = every round.",
        positive,
    )
    fraction_evaluate: float = setting(
        0.0,
        "Share of the clients that evaluate the global model on their local data each round (0 = off).",
        fraction_or_zero,
    )
    # Local training.
    local_epochs: int = setting(5, "Local epochs E per round.", positive)
    batch_size: int = setting(64, "Local mini-batch size.", positive)
    learning_rate: float = setting(
        AUTO,
        "Local SGD learning rate; `auto`: the method's, 0.1 but for the methods that do not learn at 0.1 "
        "(`scaffold`: 0.03, `fedmd`: 0.01; see their pages).",
        positive,
        auto=True,
    )
    momentum: float = setting(0.5, "Local SGD momentum.", below_one)
    weight_decay: float = setting(1e-5, "Local SGD weight decay.", non_negative)
    augment: bool = setting(
        False, "Random crop (pad 4) and horizontal flip during local training (the papers use none)."
    )
    # Where it computes.
    device: str = setting(
        "auto",
        f"Where clients compute: {DEVICE_NAMES_HELP}; a SuperNode's node config may set "
        "its own. A device the node lacks is an error, never a fall-back to the CPU.",
        _device,
        node=True,
    )
    server_device: str = setting(
        "auto",
        f"Where the server pretrains, evaluates every round and runs the centralised baseline: {DEVICE_NAMES_HELP}.",
        _device,
    )
    client_threads: int = setting(
        0,
        "Torch threads per ClientApp; 0 = the CPUs Ray gave the client in simulation, elsewhere (a device, "
        "`--in-process` cells) `OMP_NUM_THREADS` if set, all cores otherwise.",
        non_negative,
    )
    eval_batch_size: int = setting(
        64,
        "Batch size of forward-only passes (evaluation, the entropy pass, building "
        "the feature cache); lower bounds a small node's memory. A SuperNode's node "
        "config may set its own. The outputs do not depend on it (WRN-16-1 on the CPU, "
        "bit for bit); 64 ran WRN-16-1's φ 1.9× faster than 500 there, with a sixth of "
        "the memory (`benchmarks/eval_batch_size.py`, retired at d22fd37).",
        positive,
        node=True,
    )
    # Replies and aggregation.
    round_timeout: float = setting(
        3600.0, "Seconds the server waits for a round's replies; later replies are dropped.", positive
    )
    min_train_nodes: int = setting(
        1,
        "Sound updates a round needs to be aggregated; with fewer the round is skipped and the global model kept.",
        positive,
    )
    aggregation: str = setting(
        "clipped-mean",
        "How accepted updates are combined (see Reliability): "
        "`clipped-mean` (each update's norm clipped to `clip-multiple` × the round's median, "
        "weights capped at `weight-cap-multiple` × the median), `mean` (plain FedAvg, as in "
        "the papers), `median`, `trimmed-mean`, `krum`, `multi-krum` or `bulyan`.",
        one_of(*AGGREGATION_RULES),
    )
    clip_multiple: float = setting(
        1.0,
        "`clipped-mean`: each client's update Δ = θ_k − θ is clipped to this multiple of the round's median ‖Δ‖₂.",
        positive,
    )
    weight_cap_multiple: float = setting(
        1.0,
        "`clipped-mean`, `multi-krum`: each client's weight (`num-examples`) "
        "is capped at this multiple of the round's median weight.",
        positive,
    )
    trim_fraction: float = setting(
        0.2,
        "`trimmed-mean`: share of the clients' values cut from each end, per "
        "coordinate; it must cut at least one client per round.",
        _below_half,
    )
    byzantine_clients: int = setting(
        1,
        "`krum`, `multi-krum`, `bulyan`: f, the hostile clients per round to "
        "withstand (Krum needs ≥ 2f + 3 clients per round, Bulyan ≥ 4f + 3; Multi-Krum "
        "keeps n − f).",
        non_negative,
    )
    # Run control.
    resume: bool = setting(
        False,
        "Go on from the checkpoint in `<results-dir>/<run-name>/` (needs a `run-name`); "
        "without one the run starts afresh.",
    )
    fail_partitions: str = setting(
        "",
        "Testing only: `partition:mode` pairs make those clients fail or attack every "
        "round: `raise`, `hang`, `garbage` (NaN arrays), `die` (kills its own process), "
        "`scale100` (update ×100), "
        "`signflip10` (update ×−10), `huge` (values 1e20), `inflate` (`num-examples` "
        "×1000, update ×−1), `gaussian` (random update of the honest norm), "
        '`labelflip` (trains on label C−1−y); e.g. `"2:raise,5:scale100"`.',
        _fault_list,
    )
    node_wait_seconds: float = setting(
        120.0,
        "Seconds the server waits, before each round, for every client of the population to be connected; then it "
        "goes on with those connected (a node that is down costs each round this wait, `round-timeout` apart; a "
        "connected node the server refused is not waited for).",
        non_negative,
    )
    results_dir: str = setting(
        "results",
        "Folder for run results: any folder without control characters, not "
        "empty; a relative path is taken from the SuperLink's working folder (the "
        "project folder under `make run`). Runs write only inside it.",
        required_path_problem,
    )
    run_name: str = setting(
        "",
        "Results sub-folder `<results-dir>/<run-name>`, one folder name (letters, digits, "
        "`-`, `_`, `.`, `=`, `+`; not starting with `.`; at most 255 characters); empty makes "
        "one from method, dataset and time. A run is refused while another run writes the "
        "folder, and, without `resume = true`, when it holds an earlier run.",
        run_name_problem,
    )
    #: Every method's own settings, parsed (``settings(SomeMethodSettings)``); not a setting itself.
    method_settings: tuple[Any, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def settings(self, cls: type[T]) -> T:
        """The parsed instance of a method's settings dataclass ``cls``."""
        return next(s for s in self.method_settings if isinstance(s, cls))

    def to_dict(self) -> dict[str, Any]:
        """Every setting, core and methods', with its kebab-case key."""
        values = {s.key: getattr(self, s.attribute) for s in declared_settings(RunConfig)}
        for instance in self.method_settings:
            values.update({s.key: getattr(instance, s.attribute) for s in declared_settings(type(instance))})
        return values


def unknown_key_message(key: str, known: Iterable[str]) -> str:
    """``'temprature' is not a run-config key; did you mean 'temperature'?``"""
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else "docs/configuration.md lists every key"
    return f"'{key}' is not a run-config key; {hint}"
