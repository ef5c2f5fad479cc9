"""Every setting of the app: its type, the values it allows and what it means.

Defaults live in one place only, ``[tool.flwr.app.config]`` in pyproject.toml; Flower fills
``context.run_config`` from it and from ``--run-config``. ``parse_run_config`` checks that mapping once,
at the start of a run, and returns a frozen ``RunConfig``; invalid values raise ``ConfigError`` naming
the key and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from data.catalog import DATASET_NAMES
from models.registry import MODEL_NAMES_HELP, parse_model_name


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


def _below_one(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"


def _model(v: str) -> str | None:
    try:
        parse_model_name(v)
    except ValueError:
        return f"must be {MODEL_NAMES_HELP}"
    return None


@dataclass(frozen=True)
class Setting:
    """One key of ``[tool.flwr.app.config]``."""

    key: str
    type: type
    help: str
    check: Check | None = None


SETTINGS: tuple[Setting, ...] = (
    Setting("method", str, "Training method preset (see Methods).", _one_of("fedavg")),
    Setting("dataset", str, f"Dataset: {', '.join(DATASET_NAMES)} (see Data).", _one_of(*DATASET_NAMES)),
    Setting("data-dir", str, "Folder holding the dataset files; empty searches the well-known places; `hub` downloads from Hugging Face (needs internet)."),
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
    Setting("fraction-train", float, "Share of the clients that train each round.", _fraction),
    Setting("fraction-evaluate", float, "Share of the clients that evaluate the global model on their local data each round (0 = off).", _fraction_or_zero),
    Setting("local-epochs", int, "Local epochs E per round.", _positive),
    Setting("batch-size", int, "Local mini-batch size.", _positive),
    Setting("learning-rate", float, "Local SGD learning rate.", _positive),
    Setting("momentum", float, "Local SGD momentum.", _below_one),
    Setting("weight-decay", float, "Local SGD weight decay.", _non_negative),
    Setting("augment", bool, "Random crop (pad 4) and horizontal flip during local training (the papers use none)."),
    Setting("eval-batch-size", int, "Batch size for evaluation passes.", _positive),
    Setting("round-timeout", float, "Seconds the server waits for a round's replies.", _positive),
    Setting("node-wait-seconds", float, "Seconds the server waits for all clients to connect before round 1.", _non_negative),
    Setting("results-dir", str, "Folder for run results; a relative path is taken from the SuperLink's working folder (the project folder under `make run`)."),
    Setting("run-name", str, "Results sub-folder; empty makes one from method, dataset and time."),
)

def _attr(key: str) -> str:
    return key.replace("-", "_")


@dataclass(frozen=True)
class RunConfig:
    """The validated run configuration, with attribute names in snake_case."""

    method: str
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
    fraction_train: float
    fraction_evaluate: float
    local_epochs: int
    batch_size: int
    learning_rate: float
    momentum: float
    weight_decay: float
    augment: bool
    eval_batch_size: int
    round_timeout: float
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
        raise ConfigError(
            f"run config '{setting.key}' must be of type {expected.__name__}, got {type(value).__name__} {value!r}"
        )
    if expected is float and not math.isfinite(value):
        raise ConfigError(f"run config '{setting.key}' must be a finite number, got {value!r}")
    return value


def parse_run_config(run_config: Mapping[str, Any]) -> RunConfig:
    """Validate Flower's ``context.run_config`` and return a ``RunConfig``; raise ``ConfigError``."""
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.key not in run_config:
            raise ConfigError(f"run config '{setting.key}' is missing; add it to [tool.flwr.app.config]")
        value = _coerce(setting, run_config[setting.key])
        problem = setting.check(value) if setting.check else None
        if problem:
            raise ConfigError(f"run config '{setting.key}' = {value!r} is invalid: it {problem}")
        values[_attr(setting.key)] = value
    return RunConfig(**values)
