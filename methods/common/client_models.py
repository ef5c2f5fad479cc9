"""Custom-size client models (thesis Ch. 5): each client trains its own architecture, the server keeps the global
model and every client's model, and sends each client its own.

Which architecture a client trains: its node config's ``model`` in deployment, else the ``common.client-models`` entry
for its partition (``"0-5:wrn-10-1,6-9:wrn-16-1,18-19:wrn-34-1"``; ``*`` names every partition not listed; partitions
not covered train the global ``model``). The server asks each client once (``query.client_model``) and refuses a
name it cannot build or that cannot pair with the global model. A client's first model is freshly initialised
from (seed, partition); with ``common.client-init-epochs`` > 0 a client trains that many extra epochs in its first round
(FedMD's initialisation: each client model is first trained on its own data).

This module holds the settings and the mapping; the client side of a round is ``methods/common/own_model.py``, the
server's store of client models ``strategies/client_models.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from data.federated import load_test_set
from data.transforms import to_model_input
from models import SplitModel, build_model
from models.registry import parse_model_name
from run_config import ConfigError, RunConfig, dataset_info, federated_split
from run_config.catalogue import SettingValue
from run_config.settings import below_one, non_negative, positive, setting
from strategies.client_models import ClientEvaluation

if TYPE_CHECKING:
    from server_app.lifecycle import FederatedRun

CLIENT_MODELS_KEY = "common.client-models"
WILDCARD = "*"


def _mapping_problem(v: str) -> str | None:
    try:
        parse_client_models(v)
    except ValueError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class ClientModelSettings:
    NAMESPACE: ClassVar[str] = "common"

    client_models: str = setting(
        "",
        "Custom-size methods (FedAT, FedKAD, FedMD): each partition's architecture, e.g. "
        "`0-5:wrn-10-1,6-9:wrn-16-1` (`*:` names the rest; unlisted partitions train `model`). A SuperNode's node "
        "config `model` overrides it.",
        _mapping_problem,
    )
    client_init_epochs: int = setting(
        0,
        "Custom-size methods: extra local epochs in a client's first round (FedMD's initialisation: each client "
        "model trained on its own data first).",
        non_negative,
    )
    client_eval_samples: int = setting(
        1000,
        "Custom-size methods: test images the server scores every client model on each round (their mean is "
        "`client_accuracy_mean`, FedMD (clients)); 0 = off.",
        non_negative,
    )


@dataclass(frozen=True)
class ServerTrainingSettings:
    """SGD of the server-side updates of FedAT and FedKAD. The thesis gives "SGD" with lr 0.1 for them (§5.4.1,
    §5.4.2, §5.6) and no momentum, where Ch. 4 and 6 state theirs: plain SGD, momentum 0. Batch size and weight decay
    are not given: the reference attention-transfer code's, whose β = 1,000 FedAT borrows."""

    NAMESPACE: ClassVar[str] = "common"

    server_batch_size: int = setting(64, "FedAT/FedKAD server-side training: mini-batch size.", positive)
    server_momentum: float = setting(
        0.0, "FedAT/FedKAD server-side training: SGD momentum (the thesis's SGD names none).", below_one
    )
    server_weight_decay: float = setting(5e-4, "FedAT/FedKAD server-side training: SGD weight decay.", non_negative)


def input_shape(config: RunConfig) -> tuple[int, int, int]:
    return dataset_info(config).input_shape


#: Every custom-size method trains the whole model on all local data.
CUSTOM_SIZE_PRESETS: dict[str, SettingValue] = {"freeze": "none", "data-selection": "all", "selection-fraction": 1.0}
#: What a server-side seed is for: one client's copy of the global model, a client model's refinement, the round.
GLOBAL_COPY, CLIENT_MODEL_UPDATE, ROUND = 0, 1, 2


def step_seed(seed: int, server_round: int, role: int, partition_id: int = 0) -> int:
    """The seed of one server-side training (batch order, dropout) in one round, reproducible."""
    return int(np.random.SeedSequence([seed, server_round, role, partition_id, 0xFEDA]).generate_state(1)[0])


def client_evaluation(config: RunConfig, device: torch.device) -> ClientEvaluation | None:
    """Scoring of client models on ``common.client-eval-samples`` test images (None when 0)."""
    samples = config.settings(ClientModelSettings).client_eval_samples
    if samples == 0:
        return None
    split = federated_split(config)
    test = load_test_set(split)
    inputs, labels = to_model_input(test.images, split.info), torch.from_numpy(test.labels)
    return ClientEvaluation(inputs, labels, samples, config.seed, config.eval_batch_size, device)


def client_model_arguments(run: FederatedRun, pairs: Callable[[str], None]) -> dict[str, Any]:
    """What every custom-size method's strategy is built with, besides the cohort's."""
    config = run.config
    return {
        "build": lambda name, seed: build_architecture(config, name, seed),
        "pairs": pairs,
        "init_epochs": config.settings(ClientModelSettings).client_init_epochs,
        "client_evaluation": client_evaluation(config, run.device),
        "global_name": config.model,
        **run.cohort_arguments(),
    }


def parse_client_models(text: str) -> list[tuple[int, int, str]]:
    """``"0-5:wrn-10-1,7:lenet5,*:wrn-16-1"`` -> [(0, 5, "wrn-10-1"), (7, 7, "lenet5"), (-1, -1, "wrn-16-1")]
    (the wildcard as (-1, -1)). Refuses unknown architectures, bad ranges and partitions listed twice."""
    entries: list[tuple[int, int, str]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        where, _, name = part.partition(":")
        try:
            parse_model_name(name.strip())
        except ValueError:
            raise ValueError(f"names {name.strip()!r}, which is not an architecture this app builds") from None
        where = where.strip()
        if where == WILDCARD:
            entries.append((-1, -1, name.strip()))
            continue
        low, _, high = where.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"must list 'partitions:model' entries such as '0-5:wrn-10-1', got {part!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"has the partition range {where!r}; it must be 'a-b' with 0 <= a <= b")
        entries.append((first, last, name.strip()))
    listed = [pid for first, last, _ in entries if first >= 0 for pid in range(first, last + 1)]
    if len(listed) != len(set(listed)) or sum(1 for e in entries if e[0] < 0) > 1:
        raise ValueError("lists a partition (or '*') more than once")
    return entries


def architecture_of(config: RunConfig, partition_id: int) -> str:
    """The architecture ``common.client-models`` gives ``partition_id`` (the global ``model`` when it is not listed)."""
    entries = parse_client_models(config.settings(ClientModelSettings).client_models)
    for first, last, name in entries:
        if first <= partition_id <= last:
            return name
    return next((name for first, _, name in entries if first < 0), config.model)


def check_client_models(config: RunConfig, num_clients: int, pairs: Callable[[str], None]) -> dict[int, str]:
    """Every partition's architecture; ``pairs(name)`` raises ValueError when one cannot pair with the global model.
    Raises ``ConfigError`` naming ``common.client-models`` (called at the start of a run)."""
    architectures = {pid: architecture_of(config, pid) for pid in range(num_clients)}
    for name in sorted(set(architectures.values())):
        try:
            pairs(name)
        except ValueError as err:
            raise ConfigError(f"run config '{CLIENT_MODELS_KEY}': {name}: {err}") from None
    return architectures


def build_architecture(config: RunConfig, name: str, seed: int | None = None) -> SplitModel:
    """A freshly initialised ``name`` for the run's dataset (seeded when ``seed`` is given)."""
    info = dataset_info(config)
    if seed is not None:
        torch.manual_seed(seed)
    return build_model(name, in_channels=info.channels, num_classes=info.num_classes, dropout=config.dropout)
