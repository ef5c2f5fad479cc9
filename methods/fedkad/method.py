"""FedKAD and FedMD as methods of this app (thesis §5.5, Alg. 4; Li & Wang 2019 and its reference code FedMD_clean):
custom-size client models whose knowledge reaches the global model by distillation to the client consensus on
generic data.

A round:

- client k: train its own model (whole model, all local data, E epochs; the thesis: lr 0.1, E = 10, batch 128) to
  w_{k,E} (FedMD's *Revisit*); FedKAD also sends its per-class prototypes at the penultimate feature maps (level
  ``up``; zero with presence 0 for a class it does not hold), computed with the updated φ_{k,E}.
- server (``methods/fedkad/distillation.py``): score every w_{k,E} (``client_accuracy_mean``: "FedMD (clients)", scored
  where FedMD_clean scores its parties, after their private training); draw ``fedkad.generic-samples`` images from D_g
  (seeded per round; labels never used); the consensus is the uniform mean of the client models' logits on them (FedMD's
  *Communicate* and *Aggregate*); FedKAD averages each class's prototypes over its holders only. The global model
  and every client model (from w_{k,E}) are then distilled to the consensus (FedMD's *Digest*;
  ``client_distilled_accuracy_mean`` scores the client models after it), and each client receives its distilled
  model next round.

How the models are distilled. FedKAD (eqs. 5.29–5.30, §5.6): L1 + β·L_θ with SGD at ``fedkad.kd-learning-rate`` (0.1),
``fedkad.kd-epochs`` (5), batch ``common.server-batch-size`` (64). FedMD's client digest is ``fedkad.fedmd-digest``:
``reference`` (the default: FedMD_clean's mean absolute error, Adam lr 1e-3, 1 epoch, batch 256), ``thesis`` (FedKAD's
recipe without L_θ, as the thesis runs its FedMD baseline) or ``none`` (no digest: the clients trained alone, the
baseline of FedMD's own claim). FedMD's global model ("FedMD (global)", thesis §5.6, the run's ``accuracy``) is always
distilled with FedKAD's recipe without L_θ; it never feeds back to the clients, so one run gives both FedMD rows of
Table 5.11.

FedMD's initialisation: *transfer learning* (§2 of the paper), each client model trained first on the labelled
public data, then on its own data. The first half is ``fedkad.fedmd-public-epochs`` (default 10; FedMD_clean trains up
to 20 with early stopping, Adam lr 1e-3, batch 128), done on the server, which holds the public data here (D_g from
``common.generic-source = public``, the held-out share of the training set), before the client's first model is sent;
the second half is the client's first round (E epochs, plus ``common.client-init-epochs``). The thesis's FedMD baseline
and FedKAD have an unlabelled D_g (CIFAR-100 for CIFAR-10) and only the second half ("training each client model only
on its client data until convergence", §5.6): ``fedkad.fedmd-public-epochs = 0``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, RecordDict

from methods.base import Method
from methods.common.client_models import (
    CLIENT_MODEL_UPDATE,
    CUSTOM_SIZE_PRESETS,
    ROUND,
    ClientModelSettings,
    ServerTrainingSettings,
    build_architecture,
    check_client_models,
    client_model_arguments,
    input_shape,
    step_seed,
)
from methods.common.generic_data import GenericData, GenericDataSettings, generic_positions, load_generic_data
from methods.common.own_model import answer_client_model, own_model_reply, train_own_model
from methods.fedkad.distillation import (
    DEFAULT_BETA,
    DEFAULT_GENERIC_SAMPLES,
    PROTOTYPE_LEVEL,
    REFERENCE_DIGEST,
    Recipe,
    check_fedkad_settings,
    client_consensus,
    distil,
    draw_generic_indices,
    global_prototypes,
    local_prototypes,
    model_logits,
    transfer_on_public,
)
from models import SplitModel
from models.outputs import feature_map_shapes
from protocol.messages import ARRAYS, CLASS_MAPS, CLASS_PRESENT, PROTOTYPES
from protocol.replies import read_prototypes
from run_config import ConfigError, RunConfig, dataset_info, federated_split
from run_config.settings import non_negative, one_of, positive, setting
from strategies.client_models import ClientModelFedAvg, cpu_state

if TYPE_CHECKING:
    from client_app.node import Node
    from server_app.lifecycle import FederatedRun


@dataclass(frozen=True)
class FedKADSettings:
    NAMESPACE: ClassVar[str] = "fedkad"

    prototype_beta: float = setting(
        DEFAULT_BETA, "FedKAD: β weighting the prototype cross-entropy (Table 5.9: 1 for CIFAR-10).", non_negative
    )
    prototype_regularisation: bool = setting(
        True, "FedKAD: regularise distillation with the global prototypes (off: Table 5.12's w/o)."
    )
    generic_samples: int = setting(
        DEFAULT_GENERIC_SAMPLES,
        "FedKAD/FedMD: generic images drawn each round for distillation (§5.6: 5,000 of CIFAR-100; at most "
        "`common.generic-size`).",
        positive,
    )
    kd_epochs: int = setting(5, "FedKAD/FedMD: distillation epochs per round on the server.", positive)
    kd_learning_rate: float = setting(0.1, "FedKAD/FedMD: distillation learning rate.", positive)


#: The seed role of FedMD's transfer learning of a client's first model (beside ``methods.common.client_models``'
#: roles).
PUBLIC_TRANSFER = 3
#: FedMD's digest: ``reference`` (FedMD_clean's), ``thesis`` (FedKAD's distillation without prototypes, the thesis's
#: FedMD baseline), ``none`` (no digest: each client model trained alone, the baseline of FedMD's own claim).
DIGESTS = ("reference", "thesis", "none")
DIGEST_KEY, PUBLIC_EPOCHS_KEY = "fedkad.fedmd-digest", "fedkad.fedmd-public-epochs"


@dataclass(frozen=True)
class FedMDSettings:
    NAMESPACE: ClassVar[str] = "fedkad"

    fedmd_digest: str = setting(
        "reference",
        "FedMD: how the client models digest the consensus: `reference` (FedMD_clean: "
        "mean absolute error, Adam lr 1e-3, 1 epoch, batch 256), `thesis` (FedKAD's without prototypes: SGD "
        "`fedkad.kd-learning-rate`, `fedkad.kd-epochs` epochs, batch `common.server-batch-size`; thesis §5.6) or "
        "`none` (no client digests: each client model trained alone, the baseline of FedMD's claim).",
        one_of(*DIGESTS),
    )
    fedmd_public_epochs: int = setting(
        10,
        "FedMD: transfer learning, epochs each client model is first trained on the labelled public data D_g "
        "(Adam lr 1e-3, batch 128, FedMD_clean), before its own data; 0 = off (the thesis's FedMD baseline). Needs "
        "`common.generic-source = public`.",
        non_negative,
    )


def uses_prototypes(config: RunConfig) -> bool:
    return config.method == "fedkad" and config.settings(FedKADSettings).prototype_regularisation


def thesis_recipe(config: RunConfig) -> Recipe:
    """FedKAD's distillation (§5.6: SGD lr 0.1, 5 epochs, batch 64; momentum and weight decay unstated, the
    server-side training's defaults)."""
    kd, server = config.settings(FedKADSettings), config.settings(ServerTrainingSettings)
    return Recipe(
        "sgd",
        kd.kd_learning_rate,
        epochs=kd.kd_epochs,
        batch_size=server.server_batch_size,
        momentum=server.server_momentum,
        weight_decay=server.server_weight_decay,
    )


def client_recipe(config: RunConfig) -> Recipe | None:
    """How the client models are distilled: FedKAD's recipe, or FedMD's ``fedkad.fedmd-digest`` (None: no digest). The
    global model is always distilled with FedKAD's recipe: the thesis adds it to FedMD and trains it "with KD"
    (§5.6), as FedKAD trains its own."""
    if config.method != "fedmd":
        return thesis_recipe(config)
    digest = config.settings(FedMDSettings).fedmd_digest
    return {"reference": REFERENCE_DIGEST, "thesis": thesis_recipe(config), "none": None}[digest]


def public_epochs(config: RunConfig) -> int:
    """FedMD's transfer-learning epochs on the labelled public data (0 for FedKAD, whose D_g is unlabelled)."""
    return config.settings(FedMDSettings).fedmd_public_epochs if config.method == "fedmd" else 0


def kd_pairs(config: RunConfig) -> Callable[[str], None]:
    """FedKAD: a client's penultimate maps must have the global model's shape (the global prototypes feed every
    model's θ). FedMD needs only logits: every architecture this app builds pairs."""
    if not uses_prototypes(config):
        return lambda name: None
    shape = input_shape(config)
    global_model = build_architecture(config, config.model)
    if PROTOTYPE_LEVEL not in global_model.levels:  # a user's model splits at one level only
        raise ConfigError(
            f"run config 'model' = {config.model!r} has no level {PROTOTYPE_LEVEL!r} for FedKAD's prototypes"
        )
    wanted = feature_map_shapes(global_model, shape, [PROTOTYPE_LEVEL])[PROTOTYPE_LEVEL]

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
    """At start: the distillation settings, every client architecture, and a D_g that can be drawn from (and, for
    FedMD's transfer learning, labelled with the task's classes)."""
    settings = config.settings(FedKADSettings)
    check_fedkad_settings(settings.prototype_beta, settings.generic_samples)
    check_client_models(config, num_clients, kd_pairs(config))
    generic = config.settings(GenericDataSettings)
    generic_positions(federated_split(config), generic)
    if settings.generic_samples > generic.generic_size:
        raise ConfigError(
            f"run config 'fedkad.generic-samples' = {settings.generic_samples} exceeds the {generic.generic_size} "
            "images of D_g ('common.generic-size')"
        )
    if public_epochs(config) and generic.generic_source != "public":
        raise ConfigError(
            f"run config '{PUBLIC_EPOCHS_KEY}' = {public_epochs(config)} trains on labelled public data, but D_g "
            f"from 'common.generic-source' = {generic.generic_source!r} carries no labels of the task: set "
            f"'{PUBLIC_EPOCHS_KEY}' = 0 or 'common.generic-source' = 'public'"
        )


def kd_train(node: Node, msg: Message) -> RecordDict:
    """The client's round: train the own model; for FedKAD also send its class prototypes."""
    model, result = train_own_model(node, msg)
    if not uses_prototypes(node.config):
        return own_model_reply(node, model, result)
    data = node.data()
    num_classes = dataset_info(node.config).num_classes
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
    global model and of every client model; FedMD's transfer learning of each client's first model."""

    def __init__(
        self, *, config: RunConfig, generic: GenericData, device: torch.device, use_prototypes: bool, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.config, self.device, self.use_prototypes = config, device, use_prototypes
        self.settings = config.settings(FedKADSettings)
        self.global_recipe, self.client_recipe = thesis_recipe(config), client_recipe(config)
        self.public_epochs = public_epochs(config)
        self.generic = generic
        self.generic_inputs = generic.inputs.to(device)
        self.num_classes = dataset_info(config).num_classes
        self.reply_records = {PROTOTYPES: ArrayRecord} if use_prototypes else {}
        shape = input_shape(config)
        self.map_shape = feature_map_shapes(build_architecture(config, config.model), shape, [PROTOTYPE_LEVEL])[
            PROTOTYPE_LEVEL
        ]

    def client_state(self, partition_id: int) -> dict[str, torch.Tensor]:
        """A client's first model is, for FedMD with ``fedkad.fedmd-public-epochs``, first trained on the labelled
        public data (FedMD §2, transfer learning; its own data follow in its first round, with
        ``common.client-init-epochs``)."""
        if partition_id in self.client_states or not self.public_epochs:
            return super().client_state(partition_id)
        model = self.client_model(partition_id, super().client_state(partition_id)).to(self.device)
        seed = step_seed(self.seed, 0, PUBLIC_TRANSFER, partition_id)
        torch.manual_seed(seed)  # dropout
        transfer_on_public(
            model,
            self.generic_inputs,
            self.generic.labels.to(self.device),
            epochs=self.public_epochs,
            generator=torch.Generator().manual_seed(seed),
        )
        self.keep_client_model(partition_id, model)
        return self.client_states[partition_id]

    def read_client_prototypes(self, partition_id: int, content: RecordDict) -> tuple[np.ndarray, np.ndarray]:
        exact = None if self.label_counts.noisy else self.label_counts.counts.get(partition_id)
        return read_prototypes(content.array_records[PROTOTYPES], self.num_classes, self.map_shape, exact)

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        super().check_reply(partition_id, content)
        if self.use_prototypes:
            self.read_client_prototypes(partition_id, content)

    def scores(self, models: dict[int, SplitModel], prefix: str = "") -> dict[str, Any]:
        """Test accuracy of ``models`` and their mean (``client_accuracy_mean``; empty when evaluation is off)."""
        if self.client_evaluation is None or not models:
            return {}
        accuracy = {pid: self.client_evaluation.accuracy(model) for pid, model in models.items()}
        return {
            f"client{prefix}_accuracy_mean": float(np.mean(list(accuracy.values()))),
            f"client{prefix}_accuracies": {str(pid): score for pid, score in accuracy.items()},
        }

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """Alg. 4 lines 11–15 (FedMD: without the prototypes) over the accepted replies, in partition-id order.

        The client models are scored as they arrive, trained on their own data (FedMD's Revisit ends its round, and
        FedMD_clean scores its parties then: "FedMD (clients)", ``client_accuracy_mean``), and again after their
        distillation (``client_distilled_accuracy_mean``), which is what each client receives next round."""
        tick = time.perf_counter()
        device = self.device
        round_seed = step_seed(self.seed, self.current_round, ROUND)
        draw = draw_generic_indices(
            len(self.generic), self.settings.generic_samples, torch.Generator().manual_seed(round_seed)
        )
        inputs = self.generic_inputs[draw.to(device)]
        clients = {
            pid: self.client_model(pid, content.array_records[ARRAYS].to_torch_state_dict()).to(device)
            for content, pid in zip(contents, partition_ids, strict=True)
        }
        report: dict[str, Any] = self.scores(clients)
        consensus = client_consensus([model_logits(c, inputs, self.config.eval_batch_size) for c in clients.values()])
        prototypes, held = None, None
        if self.use_prototypes:
            read = [self.read_client_prototypes(pid, content) for content, pid in zip(contents, partition_ids)]
            stacked = torch.from_numpy(np.stack([maps for maps, _ in read])).to(device)
            prototypes, held = global_prototypes(stacked, torch.from_numpy(np.stack([p for _, p in read])).to(device))
        beta = self.settings.prototype_beta
        global_model = self.global_model().to(device)
        torch.manual_seed(round_seed)  # dropout
        fit = distil(
            global_model,
            inputs,
            consensus,
            prototypes,
            held,
            recipe=self.global_recipe,
            beta=beta,
            generator=torch.Generator().manual_seed(round_seed),
        )
        for pid, client in clients.items():
            if self.client_recipe is not None:
                seed = step_seed(self.seed, self.current_round, CLIENT_MODEL_UPDATE, pid)
                torch.manual_seed(seed)
                generator = torch.Generator().manual_seed(seed)
                recipe = self.client_recipe
                distil(client, inputs, consensus, prototypes, held, recipe=recipe, beta=beta, generator=generator)
            self.keep_client_model(pid, client)
        if self.client_recipe is not None:
            report |= self.scores(clients, "_distilled")
        report |= {"server_seconds": time.perf_counter() - tick, "distillation_loss": fit.kd[-1], **fit.report()}
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


SETTINGS = (FedKADSettings, FedMDSettings, ClientModelSettings, ServerTrainingSettings, GenericDataSettings)
FEDKAD = Method(
    "fedkad",
    "FedKAD: custom-size client models, distillation to the client consensus regularised by prototypes (Alg. 4).",
    presets=CUSTOM_SIZE_PRESETS,
    settings=SETTINGS,
    client_train=kd_train,
    strategy=kd_strategy,
    queries={"client_model": answer_client_model},
    check_run=check_kd_run,
)
#: FedMD's clients train at lr 0.01, not the app's 0.1: at 0.1 the first private epoch undoes the transfer learning
#: (FedMD_clean trains its parties with Adam, lr 1e-3). Measured, 3 clients, 2 rounds, LeNet-5 (docs/methods/fedmd.md):
#: at 0.1 the clients' mean ends at 18.0% and the global model at chance (10.1%); at 0.01, 51.9% and 36.1%.
FEDMD_LEARNING_RATE = 0.01
FEDMD = Method(
    "fedmd",
    "FedMD: custom-size client models distilled to the client consensus; a global model distilled beside them.",
    presets={**CUSTOM_SIZE_PRESETS, "learning-rate": FEDMD_LEARNING_RATE},
    settings=SETTINGS,
    client_train=kd_train,
    strategy=kd_strategy,
    queries={"client_model": answer_client_model},
    check_run=check_kd_run,
)
METHODS = (FEDKAD, FEDMD)
