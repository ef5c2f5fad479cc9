"""FedKAD and FedMD as methods of this app (thesis §5.5, Alg. 4; Li & Wang 2019): custom-size client models whose
knowledge reaches the global model by distillation to the client consensus on unlabelled generic data.

A round:

- client k: train its own model (whole model, all local data, E epochs; the thesis: lr 0.1, E = 10, batch 128) to
  w_{k,E}; FedKAD also sends its per-class prototypes at the penultimate feature maps (level ``up``; zero with
  presence 0 for a class it does not hold), computed with the updated φ_{k,E}.
- server (``methods/fedkad.py``): draw ``generic-samples`` images from D_g (seeded per round; labels never used);
  the consensus is the uniform mean of the client models' logits on them; FedKAD averages each class's prototypes
  over its holders only. The global model and every client model (from w_{k,E}) then minimise
  L1(logits, consensus) + β·Σ_c CE(θ(F_{g,c}), c) for ``kd-epochs`` (FedMD, and FedKAD with
  ``prototype-regularisation = false``: the L1 term only); each client receives its distilled model next round.

``fedmd`` is the original FedMD (clients distil to the consensus; its figure of merit is the clients' mean test
accuracy, ``client_accuracy_mean``) with a global model distilled to the same consensus beside it ("FedMD
(global)", the run's ``accuracy``): the global model never feeds back to the clients, so one run gives both rows of
Table 5.11. FedMD's initialisation (each client model trained on its own data first) is ``client-init-epochs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, RecordDict

from data.catalog import DATASETS
from data.generic import GenericData, GenericDataSettings, generic_positions, load_generic_data
from methods.base import Method
from methods.client_models import (
    CLIENT_MODEL_UPDATE,
    CUSTOM_SIZE_PRESETS,
    ROUND,
    ClientModelSettings,
    ServerTrainingSettings,
    build_architecture,
    check_client_models,
    client_model_arguments,
    client_model_query,
    input_shape,
    step_seed,
)
from methods.fedkad import (
    DEFAULT_BETA,
    DEFAULT_GENERIC_SAMPLES,
    PROTOTYPE_LEVEL,
    check_fedkad_settings,
    client_consensus,
    distil,
    draw_generic_indices,
    global_prototypes,
    local_prototypes,
    model_logits,
)
from methods.model_outputs import feature_map_shapes
from protocol.messages import ARRAYS, CLASS_MAPS, CLASS_PRESENT, PROTOTYPES
from protocol.replies import read_prototypes
from run_config import ConfigError, RunConfig, federated_split
from run_config.settings import non_negative, positive, setting
from strategies.client_models import ClientModelFedAvg, cpu_state

if TYPE_CHECKING:
    from client_app.node import Node
    from server_app.lifecycle import FederatedRun


@dataclass(frozen=True)
class FedKADSettings:
    prototype_beta: float = setting(
        DEFAULT_BETA, "FedKAD: β weighting the prototype cross-entropy (Table 5.9: 1 for CIFAR-10).", non_negative
    )
    prototype_regularisation: bool = setting(
        True, "FedKAD: regularise distillation with the global prototypes (off: Table 5.12's w/o)."
    )
    generic_samples: int = setting(
        DEFAULT_GENERIC_SAMPLES, "FedKAD/FedMD: generic images drawn each round for distillation (§5.6).", positive
    )
    kd_epochs: int = setting(5, "FedKAD/FedMD: distillation epochs per round on the server.", positive)
    kd_learning_rate: float = setting(0.1, "FedKAD/FedMD: distillation learning rate.", positive)


def uses_prototypes(config: RunConfig) -> bool:
    return config.method == "fedkad" and config.settings(FedKADSettings).prototype_regularisation


def kd_pairs(config: RunConfig) -> Callable[[str], None]:
    """FedKAD: a client's penultimate maps must have the global model's shape (the global prototypes feed every
    model's θ). FedMD needs only logits: every architecture this app builds pairs."""
    if not uses_prototypes(config):
        return lambda name: None
    shape = input_shape(config)
    wanted = feature_map_shapes(build_architecture(config, config.model), shape, [PROTOTYPE_LEVEL])[PROTOTYPE_LEVEL]

    def pairs(name: str) -> None:
        model = build_architecture(config, name)
        if PROTOTYPE_LEVEL not in model.levels:
            raise ValueError(f"it has no level {PROTOTYPE_LEVEL!r} to take prototypes at")
        got = feature_map_shapes(model, shape, [PROTOTYPE_LEVEL])[PROTOTYPE_LEVEL]
        if got != wanted:
            raise ValueError(
                f"its prototypes at {PROTOTYPE_LEVEL!r} have shape {got}, the global model's θ takes {wanted}"
            )

    return pairs


def check_kd_run(config: RunConfig, num_clients: int) -> None:
    """At start: the distillation settings, every client architecture, and a D_g that can be drawn from."""
    settings = config.settings(FedKADSettings)
    check_fedkad_settings(settings.prototype_beta, settings.generic_samples)
    check_client_models(config, num_clients, kd_pairs(config))
    generic = config.settings(GenericDataSettings)
    generic_positions(federated_split(config), generic)
    if settings.generic_samples > generic.generic_size:
        raise ConfigError(
            f"run config 'generic-samples' = {settings.generic_samples} exceeds the {generic.generic_size} images "
            "of D_g ('generic-size')"
        )


def kd_train(node: Node, msg: Message) -> RecordDict:
    """The client's round: train the own model; for FedKAD also send its class prototypes."""
    from client_app.own_model import own_model_reply, train_own_model  # not at import: client_app imports methods

    model, result = train_own_model(node, msg)
    if not uses_prototypes(node.config):
        return own_model_reply(node, model, result)
    data = node.data()
    num_classes = DATASETS[node.config.dataset].num_classes
    maps, present = local_prototypes(
        model,
        data.inputs(node.device),
        data.labels.to(node.device),
        num_classes,
        batch_size=node.config.eval_batch_size,
    )
    prototypes = ArrayRecord(
        {CLASS_MAPS: maps.float().cpu().contiguous(), CLASS_PRESENT: present.to(torch.uint8).cpu().contiguous()}
    )
    return own_model_reply(node, model, result, **{PROTOTYPES: prototypes})


class DistillationStrategy(ClientModelFedAvg):
    """The server of FedKAD (``use_prototypes``) and FedMD: consensus, global prototypes, distillation of the
    global model and of every client model."""

    def __init__(
        self, *, config: RunConfig, generic: GenericData, device: torch.device, use_prototypes: bool, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.config, self.device, self.use_prototypes = config, device, use_prototypes
        self.settings = config.settings(FedKADSettings)
        self.training = config.settings(ServerTrainingSettings)
        self.generic = generic
        self.generic_inputs = generic.inputs.to(device)
        self.num_classes = DATASETS[config.dataset].num_classes
        self.reply_records = {PROTOTYPES: ArrayRecord} if use_prototypes else {}
        shape = input_shape(config)
        self.map_shape = feature_map_shapes(build_architecture(config, config.model), shape, [PROTOTYPE_LEVEL])[
            PROTOTYPE_LEVEL
        ]

    def read_client_prototypes(self, partition_id: int, content: RecordDict) -> tuple[np.ndarray, np.ndarray]:
        exact = None if self.label_counts.noisy else self.label_counts.counts.get(partition_id)
        return read_prototypes(content.array_records[PROTOTYPES], self.num_classes, self.map_shape, exact)

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        super().check_reply(partition_id, content)
        if self.use_prototypes:
            self.read_client_prototypes(partition_id, content)

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """Alg. 4 lines 11–15 (FedMD: without the prototypes) over the accepted replies, in partition-id order."""
        tick = time.perf_counter()
        s, t, device = self.settings, self.training, self.device
        round_seed = step_seed(self.seed, self.current_round, ROUND)
        draw = draw_generic_indices(len(self.generic), s.generic_samples, torch.Generator().manual_seed(round_seed))
        inputs = self.generic_inputs[draw.to(device)]
        clients = {
            pid: self.client_model(pid, content.array_records[ARRAYS].to_torch_state_dict()).to(device)
            for content, pid in zip(contents, partition_ids, strict=True)
        }
        consensus = client_consensus([model_logits(c, inputs, self.config.eval_batch_size) for c in clients.values()])
        prototypes, held = None, None
        if self.use_prototypes:
            read = [self.read_client_prototypes(pid, content) for content, pid in zip(contents, partition_ids)]
            stacked = torch.from_numpy(np.stack([maps for maps, _ in read])).to(device)
            prototypes, held = global_prototypes(stacked, torch.from_numpy(np.stack([p for _, p in read])).to(device))
        sgd: dict[str, Any] = {
            "epochs": s.kd_epochs,
            "batch_size": t.server_batch_size,
            "lr": s.kd_learning_rate,
            "momentum": t.server_momentum,
            "weight_decay": t.server_weight_decay,
            "beta": s.prototype_beta,
        }
        global_model = self.global_model().to(device)
        torch.manual_seed(round_seed)  # dropout
        global_loss = distil(
            global_model,
            inputs,
            consensus,
            prototypes,
            held,
            generator=torch.Generator().manual_seed(round_seed),
            **sgd,
        )
        for pid, client in clients.items():
            seed = step_seed(self.seed, self.current_round, CLIENT_MODEL_UPDATE, pid)
            torch.manual_seed(seed)
            distil(client, inputs, consensus, prototypes, held, generator=torch.Generator().manual_seed(seed), **sgd)
            self.keep_client_model(pid, client)
        report: dict[str, Any] = {
            "server_seconds": time.perf_counter() - tick,
            "distillation_loss": global_loss,
            **self.client_accuracies(partition_ids),
        }
        if self.generic.labelled:  # how often the consensus names the true class (diagnostic; labels unused)
            report["consensus_accuracy"] = float(
                (consensus.argmax(1).cpu() == self.generic.labels[draw]).float().mean()
            )
        if self.use_prototypes:
            report["prototype_bytes_up"] = sum(c.array_records[PROTOTYPES].count_bytes() for c in contents)
            report["classes_held"] = int(held.sum()) if held is not None else 0
        return ArrayRecord(cpu_state(global_model)), report


def kd_strategy(run: FederatedRun) -> DistillationStrategy:
    config = run.config
    return DistillationStrategy(
        config=config,
        generic=load_generic_data(federated_split(config), config.settings(GenericDataSettings)),
        device=run.device,
        use_prototypes=uses_prototypes(config),
        **client_model_arguments(run, kd_pairs(config)),
    )


SETTINGS = (FedKADSettings, ClientModelSettings, ServerTrainingSettings, GenericDataSettings)
FEDKAD = Method(
    "fedkad",
    "FedKAD: custom-size client models, distillation to the client consensus regularised by prototypes (Alg. 4).",
    presets=CUSTOM_SIZE_PRESETS,
    settings=SETTINGS,
    client_train=kd_train,
    strategy=kd_strategy,
    queries={"client_model": client_model_query},
    check_run=check_kd_run,
)
FEDMD = Method(
    "fedmd",
    "FedMD: custom-size client models distilled to the client consensus; a global model distilled beside them.",
    presets=CUSTOM_SIZE_PRESETS,
    settings=SETTINGS,
    client_train=kd_train,
    strategy=kd_strategy,
    queries={"client_model": client_model_query},
    check_run=check_kd_run,
)
METHODS = (FEDKAD, FEDMD)
