"""FedAT as a method of this app (thesis §5.3, Alg. 3): custom-size client models, metadata, the three server steps.

A client's first model is the global model reduced to its architecture (``fedat.client-init = global``: every layer it
shares with the global model copied, e.g. a WRN-10-1 is the global WRN-16-1 without the second block of each group),
so that φ_k and φ_g start equal up to the metadata level and their maps stay related: θ_g learns from φ_k's maps in
step 2 and reads φ_g's afterwards, which Table 5.4 needs and the thesis does not say how it gets (§5.1.2 names
client models made "by reducing the block size from teacher models"). With independently initialised clients
(``fresh``) the global model ends lower (measurements/experiments/fedat-table5-4 and fedat-stragglers).

A round, for each client k (all deliver: their models fit their hardware):

- client: train its own model (whole model, all local data, E epochs; the thesis's lr 0.01, E = 5) to w_{k,E}; then
  extract the metadata with the updated φ_{k,E}: the feature maps of its local samples at ``common.metadata-level`` (all
  of them, or a seeded ``fedat.metadata-fraction``, Fig. 5.10) with their labels; reply with w_{k,E} and the metadata.
- server, per client on a fresh copy of w_g^t (``methods/fedat/attention_transfer.py``): step 1 trains all of the copy
  on D_g with CE + β·AT against w_{k,E} at ``fedat.at-levels``; step 2 trains only θ (above the level) on the client's
  metadata; step 3 trains only φ on D_g with CE + β·AT at the levels inside φ, θ's weights frozen bitwise (its BatchNorm
  follows φ's new maps: ``fedat.step3-theta-batchnorm``). Then w_g^{t+1} = Σ_k p_k w_{g,s3}^(k)
  with p_k ∝ |D_k|, and each client model is refined from w_{k,E} on D_g with the new global model as teacher and
  sent back next round.

D_g is labelled: drawn from the server's held-out split (``common.generic-source = "public"``; §5.4.2: 2,500 images of
classes 1, 2, 3, 4, 6, 7, 9; ``common.generic-size`` defaults to 1,000, which the default 1,200 held-out images hold).
The server-side learning rates and epochs default to the thesis's (plain SGD, AT 0.1 × 2 epochs, metadata 0.1 × 2
epochs), β = 1,000. The metadata bytes are counted in ``bytes_up`` and reported apart (``metadata_bytes_up``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, RecordDict

from data.sample_share import selection_size
from methods.base import Method
from methods.common.client_models import (
    CLIENT_MODEL_UPDATE,
    CUSTOM_SIZE_PRESETS,
    GLOBAL_COPY,
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
from methods.common.metadata_level import MetadataLevelSettings
from methods.common.own_model import answer_client_model, own_model_reply, train_own_model
from methods.fedat.attention_transfer import (
    AT_FORMS,
    AT_LEVELS,
    DEFAULT_BETA,
    THETA_BATCHNORM,
    aggregate_global_copies,
    check_pairing,
    inherit_from_global,
    not_inheritable,
    refine_client,
    three_steps,
)
from models.outputs import extract_in_batches
from protocol.messages import ARRAYS, FEATURE_MAPS, MAP_LABELS, METADATA, METRICS, NUM_EXAMPLES
from protocol.replies import read_metadata
from run_config import ConfigError, RunConfig, dataset_info, federated_split
from run_config.settings import fraction, non_negative, one_of, positive, setting
from strategies.client_models import ClientModelFedAvg, cpu_state

if TYPE_CHECKING:
    from client_app.node import Node
    from server_app.lifecycle import FederatedRun


#: How a FedAT client's first model starts (``fedat.client-init``).
CLIENT_INITS: tuple[str, ...] = ("global", "fresh")


def parse_levels(text: str) -> tuple[str, ...]:
    """``"low,mid"`` -> ("low", "mid"); refuses levels that are not low/mid/up, repeats and an empty list."""
    levels = tuple(part.strip() for part in text.split(",") if part.strip())
    if not levels or len(set(levels)) != len(levels) or any(level not in AT_LEVELS for level in levels):
        raise ValueError(f"must list distinct levels out of {', '.join(AT_LEVELS)}, got {text!r}")
    return levels


def _levels_problem(text: str) -> str | None:
    try:
        parse_levels(text)
    except ValueError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class FedATSettings:
    NAMESPACE: ClassVar[str] = "fedat"

    metadata_fraction: float = setting(
        1.0, "FedAT: share of its local samples whose feature maps a client sends (Fig. 5.10; at least one).", fraction
    )
    at_beta: float = setting(DEFAULT_BETA, "FedAT: β weighting the attention-transfer loss.", non_negative)
    at_form: str = setting(
        "reference",
        "FedAT: AT loss scale, `reference` (the AT code's, for which β = 1,000 was chosen) or `thesis` (eq. 5.14's "
        "L2 norm).",
        one_of(*AT_FORMS),
    )
    at_epochs: int = setting(2, "FedAT: epochs of each AT step on D_g (steps 1 and 3, client refinement).", positive)
    at_learning_rate: float = setting(0.1, "FedAT: learning rate of the AT steps.", positive)
    metadata_epochs: int = setting(
        2, "FedAT: epochs of step 2 on a client's metadata (0: no step 2, the ablation without metadata).", non_negative
    )
    metadata_learning_rate: float = setting(0.1, "FedAT: learning rate of step 2.", positive)
    step3_attention: bool = setting(True, "FedAT: attention transfer in step 3 (off: Table 5.4's w/o AT).")
    step3_theta_batchnorm: str = setting(
        "train",
        "FedAT: θ's BatchNorm in step 3, where θ's weights are frozen: `train` (batch statistics during the step, "
        "running statistics then re-estimated on the maps φ now gives θ) or `frozen` (eval mode: step 2's statistics "
        "of the client's metadata kept).",
        one_of(*THETA_BATCHNORM),
    )
    at_levels: str = setting(
        ",".join(AT_LEVELS),
        "FedAT: levels whose attention maps AT compares (I of eq. 5.14), comma-separated; each must give C × H × W "
        "maps in every model (LeNet-5: `low` only).",
        _levels_problem,
    )
    client_init: str = setting(
        "global",
        "FedAT: a client's first model: `global` (the global model with blocks removed: every layer the client "
        "architecture shares with it copied, so that client and global features at the metadata level are related) "
        "or `fresh` (initialised independently).",
        one_of(*CLIENT_INITS),
    )

    @property
    def attention_levels(self) -> tuple[str, ...]:
        return parse_levels(self.at_levels)


def fedat_pairs(config: RunConfig) -> Callable[[str], None]:
    """Raises ValueError unless a client architecture pairs with the global model at the metadata level and at
    every AT level and, with ``fedat.client-init = global``, is the global model with blocks removed."""
    level = config.settings(MetadataLevelSettings).metadata_level
    settings = config.settings(FedATSettings)
    global_model = build_architecture(config, config.model)

    def pairs(name: str) -> None:
        client = build_architecture(config, name)
        check_pairing(client, global_model, input_shape(config), level, settings.attention_levels)
        missing = not_inheritable(client.state_dict(), global_model.state_dict())
        if settings.client_init == "global" and missing:
            raise ValueError(
                "'fedat.client-init' = 'global' needs every layer of the client model in the global model "
                f"({config.model}), which lacks {len(missing)} of its entries, e.g. {missing[0]!r} (set "
                "'fedat.client-init' = 'fresh')"
            )

    return pairs


def check_fedat_run(config: RunConfig, num_clients: int) -> None:
    """At start: every client architecture pairs with the global model; D_g is labelled and can be drawn."""
    check_client_models(config, num_clients, fedat_pairs(config))
    generic = config.settings(GenericDataSettings)
    if generic.generic_source != "public":
        raise ConfigError(
            "run config 'common.generic-source' must be 'public' for FedAT: its D_g is labelled with the task's classes"
        )
    generic_positions(federated_split(config), generic)


def metadata_rows(num_local: int, share: float, seed: int, server_round: int, partition_id: int) -> torch.Tensor:
    """Which local samples a client sends maps of: all, in order, or a seeded ⌈share·n⌉ of them, sorted."""
    if share >= 1.0:
        return torch.arange(num_local)
    generator = torch.Generator().manual_seed(step_seed(seed, server_round, ROUND, partition_id))
    return torch.randperm(num_local, generator=generator)[: selection_size(num_local, share)].sort().values


def fedat_train(node: Node, msg: Message) -> RecordDict:
    """The client's round: train the own model, then extract the metadata with the updated φ_{k,E}."""
    model, result = train_own_model(node, msg)
    settings = node.config.settings(FedATSettings)
    tick = time.perf_counter()
    data = node.data()
    server_round, _ = node.round_of(msg)
    rows = metadata_rows(len(data), settings.metadata_fraction, node.config.seed, server_round, node.partition_id)
    inputs = data.rows(node.device, rows)
    maps = (
        extract_in_batches(
            model, inputs, node.config.settings(MetadataLevelSettings).metadata_level, node.config.eval_batch_size
        )
        .float()
        .cpu()
    )
    metadata = ArrayRecord({FEATURE_MAPS: maps.contiguous(), MAP_LABELS: data.labels[rows].contiguous()})
    result = dataclasses.replace(result, train_seconds=result.train_seconds + time.perf_counter() - tick)
    return own_model_reply(node, model, result, **{METADATA: metadata})


class FedATStrategy(ClientModelFedAvg):
    """The server of FedAT: client models and metadata in, the three steps per client, weighted aggregation,
    server-side refinement of each client model."""

    reply_records = {METADATA: ArrayRecord}

    def __init__(self, *, config: RunConfig, generic: GenericData, device: torch.device, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config, self.device = config, device
        self.settings = config.settings(FedATSettings)
        self.training = config.settings(ServerTrainingSettings)
        self.generic_inputs, self.generic_labels = generic.inputs.to(device), generic.labels.to(device)
        self.map_shape = tuple(
            build_architecture(config, config.model)
            .forward_to(torch.zeros(1, *input_shape(config)), self.level)
            .shape[1:]
        )

    @property
    def level(self) -> str:
        return self.config.settings(MetadataLevelSettings).metadata_level

    def read_client_metadata(self, partition_id: int, content: RecordDict) -> tuple[np.ndarray, np.ndarray]:
        """The reply's metadata, checked: one map per sent sample, of the global θ's input shape, with labels that
        are the client's own (when it sends all of them and reported exact counts)."""
        num_local = self.population.identity_of(partition_id).num_examples
        share = self.settings.metadata_fraction
        exact = share >= 1.0 and not self.label_counts.noisy
        return read_metadata(
            content.array_records[METADATA],
            selection_size(num_local, share) if share < 1.0 else num_local,
            self.map_shape,
            dataset_info(self.config).num_classes,
            self.label_counts.counts.get(partition_id) if exact else None,
        )

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        super().check_reply(partition_id, content)
        self.read_client_metadata(partition_id, content)

    def first_client_state(self, partition_id: int) -> dict[str, torch.Tensor]:
        """With ``fedat.client-init = global``, a client's first model is the round's global model reduced to its
        architecture (``inherit_from_global``); with ``fresh``, built from (seed, partition)."""
        fresh = super().first_client_state(partition_id)
        if self.settings.client_init == "fresh":
            return fresh
        return inherit_from_global(fresh, self.global_model().state_dict())

    def _sgd(self) -> dict[str, Any]:
        t = self.training
        return {"batch_size": t.server_batch_size, "momentum": t.server_momentum, "weight_decay": t.server_weight_decay}

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """Alg. 3 lines 11–21 over the accepted replies (in partition-id order)."""
        tick = time.perf_counter()
        s, device = self.settings, self.device
        global_model = self.global_model().to(device)
        copies, sizes, clients = [], [], {}
        for content, pid in zip(contents, partition_ids, strict=True):
            seed = step_seed(self.seed, self.current_round, GLOBAL_COPY, pid)
            torch.manual_seed(seed)  # dropout
            client = self.client_model(pid, content.array_records[ARRAYS].to_torch_state_dict()).to(device)
            maps, labels = self.read_client_metadata(pid, content)
            copy = three_steps(
                global_model,
                client,
                self.generic_inputs,
                self.generic_labels,
                torch.from_numpy(maps).to(device),
                torch.from_numpy(labels).to(device),
                level=self.level,
                at_epochs=s.at_epochs,
                at_lr=s.at_learning_rate,
                metadata_epochs=s.metadata_epochs,
                metadata_lr=s.metadata_learning_rate,
                beta=s.at_beta,
                form=s.at_form,  # type: ignore[arg-type]
                at_levels=s.attention_levels,
                step3_attention=s.step3_attention,
                theta_batchnorm=s.step3_theta_batchnorm,  # type: ignore[arg-type]
                generator=torch.Generator().manual_seed(seed),
                **self._sgd(),
            )
            copies.append(cpu_state(copy))
            sizes.append(int(content.metric_records[METRICS][NUM_EXAMPLES]))  # type: ignore[arg-type]
            clients[pid] = client
        new_global = aggregate_global_copies(copies, sizes)
        global_model.load_state_dict(new_global)
        for pid, client in clients.items():
            refine_client(
                client,
                global_model,
                self.generic_inputs,
                self.generic_labels,
                epochs=s.at_epochs,
                lr=s.at_learning_rate,
                beta=s.at_beta,
                form=s.at_form,  # type: ignore[arg-type]
                at_levels=s.attention_levels,
                generator=torch.Generator().manual_seed(
                    step_seed(self.seed, self.current_round, CLIENT_MODEL_UPDATE, pid)
                ),
                **self._sgd(),
            )
            self.keep_client_model(pid, client)
        report = {
            "metadata_bytes_up": sum(c.array_records[METADATA].count_bytes() for c in contents),
            "server_seconds": time.perf_counter() - tick,
            **self.client_accuracies(partition_ids),
        }
        return ArrayRecord(new_global), report


def fedat_strategy(run: FederatedRun) -> FedATStrategy:
    config = run.config
    return FedATStrategy(
        config=config,
        generic=load_generic_data(federated_split(config), config.settings(GenericDataSettings)),
        device=run.device,
        **client_model_arguments(run, fedat_pairs(config)),
    )


FEDAT = Method(
    "fedat",
    "FedAT: custom-size client models, metadata and attention transfer (thesis Alg. 3); see `common.client-models`.",
    presets=CUSTOM_SIZE_PRESETS,
    settings=(FedATSettings, MetadataLevelSettings, ClientModelSettings, ServerTrainingSettings, GenericDataSettings),
    client_train=fedat_train,
    strategy=fedat_strategy,
    queries={"client_model": answer_client_model},
    check_run=check_fedat_run,
)
METHODS = (FEDAT,)
