"""FedSplit's server step (thesis Alg. 5, lines 12-16): FedAvg of the clients' models, plus a θ trained from scratch
on the union of their metadata, composed with the φ they extracted it with and evaluated beside the global model.

Each round the strategy reads every reply's metadata through ``protocol/feature_metadata.py`` (a reply whose
metadata is unsound is refused whole, model included), aggregates the accepted models as ``PartialModelFedAvg``
does (the global model w_g^{t+1} that the next round distributes), and trains θ_meta^t on the accepted replies'
metadata (``methods/fedsplit/meta_training.py``). rounds.jsonl gains ``composed_accuracy`` and ``composed_loss`` (the
composed model {θ_meta^t, φ_g^t} on the test set), ``meta_train_loss``, ``meta_train_seconds``, ``metadata_maps``
(maps trained on), ``metadata_bytes`` (their records as received, labels included; part of ``bytes_up``) and
``metadata_map_bytes`` (the maps alone as float32, the thesis's unit); the latest composed model is written to
``composed_model.pt``. With ``fedsplit.meta-every`` n > 1, θ_meta is trained (and those fields reported) only every n-th
round and in the last, to save server time; the clients' work and the metadata sent do not change.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from methods.common.payload_size import feature_map_bytes
from methods.fedsplit.meta_training import MetaTraining, compose, meta_train
from models.device import synchronize
from models.split_model import SplitModel
from protocol.feature_metadata import FeatureMetadata, MetadataLimits, read_feature_metadata
from protocol.messages import FEATURE_METADATA, FEDSPLIT_TRAIN_METRICS
from server_app.atomic_write import replace_file
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.partial_model import merge_state

COMPOSED_MODEL_FILE = "composed_model.pt"
#: (a full state dict) -> test loss and accuracy
EvaluateState = Callable[[Mapping[str, torch.Tensor]], tuple[float, float]]


@dataclass(frozen=True)
class MetadataPlan:
    """What the server does with the metadata: where θ starts, how it trains, how the composed model is judged."""

    level: str  # the metadata level l: θ is every stage above it
    limits: MetadataLimits  # what a client's metadata may hold (its label counts are added per client)
    training: MetaTraining
    fresh_model: Callable[[], SplitModel]  # a model holding θ_g^ini, the same initialisation every round
    evaluate: EvaluateState
    device: torch.device
    seed: int
    directory: Path | None = None  # where composed_model.pt goes (None: not written)
    every: int = 1  # θ_meta is trained in every ``every``-th round and in ``last_round`` (the thesis: every round)
    last_round: int = 0

    def trains_in(self, server_round: int) -> bool:
        """Whether round ``server_round`` trains θ_meta and evaluates the composed model."""
        return server_round % self.every == 0 or server_round == self.last_round


def meta_seed(seed: int, server_round: int) -> int:
    """The seed of round ``server_round``'s batch order in meta-training."""
    return int(np.random.SeedSequence([seed, server_round, 0x5E7A]).generate_state(1)[0])


class FedSplitFedAvg(PartialModelFedAvg):
    """PartialModelFedAvg whose replies carry metadata, and whose rounds also train and evaluate a composed model."""

    reply_records: Mapping[str, type] = {FEATURE_METADATA: ArrayRecord}
    reply_metrics = FEDSPLIT_TRAIN_METRICS

    def __init__(self, *, plan: MetadataPlan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self._round = 0
        self._metadata: dict[int, FeatureMetadata] = {}  # partition id -> its validated metadata this round

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._round, self._metadata = server_round, {}
        return super().configure_round(server_round, arrays, config, grid)

    def limits_for(self, partition_id: int) -> MetadataLimits:
        """The plan's limits with this client's label counts, where the server holds them exactly."""
        counts = None if self.label_counts.noisy else self.label_counts.counts.get(partition_id)
        return dataclasses.replace(self.plan.limits, class_counts=None if counts is None else tuple(map(int, counts)))

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """The shared checks, then the metadata's (``Refused`` names what is wrong)."""
        super().check_reply(partition_id, content)
        identity = self.population.identity_of(partition_id)
        record = content[FEATURE_METADATA]
        self._metadata[partition_id] = read_feature_metadata(record, identity, self.limits_for(partition_id))

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """FedAvg of the models as usual; then, in the plan's rounds, θ_meta on the same replies' metadata; reported
        with the rule's report."""
        arrays, report = super().aggregate_arrays(contents, partition_ids)
        received = sum(content.array_records[FEATURE_METADATA].count_bytes() for content in contents)
        report = {**report, "metadata_bytes": received}
        if self.plan.trains_in(self._round):
            report.update(self.metadata_round([self._metadata[pid] for pid in partition_ids]))
        return arrays, report

    def sent_model(self, order: Iterable[str]) -> dict[str, torch.Tensor]:
        """w_g^t, the global model this round sent: its φ_g^t is what the clients extracted their maps with."""
        return merge_state(self.frozen.to_torch_state_dict(), self._sent.to_torch_state_dict(), order)

    def metadata_round(self, metadata: list[FeatureMetadata]) -> dict[str, Any]:
        """Train θ_meta^t on the union of ``metadata``, compose {θ_meta^t, φ_g^t}, evaluate and save it."""
        plan, tick = self.plan, time.perf_counter()
        maps = torch.from_numpy(np.concatenate([m.feature_maps for m in metadata])).to(plan.device)
        labels = torch.from_numpy(np.concatenate([m.labels for m in metadata])).to(plan.device)
        model = plan.fresh_model().to(plan.device)
        generator = torch.Generator().manual_seed(meta_seed(plan.seed, self._round))
        loss = meta_train(model, plan.level, maps, labels, plan.training, generator)
        synchronize(plan.device)
        seconds = time.perf_counter() - tick
        state = {key: value.cpu() for key, value in model.state_dict().items()}
        composed = compose(self.sent_model(state.keys()), state, model.upper_state_keys(plan.level))
        composed_loss, composed_accuracy = plan.evaluate(composed)
        if plan.directory is not None:
            replace_file(plan.directory / COMPOSED_MODEL_FILE, lambda handle: torch.save(composed, handle))
        return {
            "composed_accuracy": composed_accuracy,
            "composed_loss": composed_loss,
            "meta_train_loss": loss,
            "meta_train_seconds": seconds,
            "metadata_maps": len(labels),
            "metadata_map_bytes": feature_map_bytes(len(labels), plan.limits.map_shape),
        }


def composed_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's fields for the composed model: its best and final accuracy, and the metadata sent in all."""
    composed = [r for r in rounds if r.get("composed_accuracy") is not None]
    best = max(composed, key=lambda r: r["composed_accuracy"], default=None)
    return {
        "best_composed_accuracy": best["composed_accuracy"] if best else None,
        "best_composed_round": best["round"] if best else None,
        "final_composed_accuracy": composed[-1]["composed_accuracy"] if composed else None,
        "total_metadata_bytes": sum(r.get("metadata_bytes", 0) for r in rounds),
        "mean_metadata_maps": (math.fsum(r["metadata_maps"] for r in composed) / len(composed) if composed else None),
    }
