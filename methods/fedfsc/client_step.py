"""The client step of the FedFSC family (methods/fedfsc/method.py): the work the server's message gives it.

A participant few-shot updates the received base model's classifier (φ^t frozen, in eval mode; its penultimate
features computed once), runs the normal update of the base trainer (the configured ``objective``; E epochs, or
E_r for a baseline+ straggler; with FSCProx or baseProx added), or both. The few-shot update comes first, on the
model as received, so it trains on the base model {θ^t, φ^t} that was distributed (Alg. 1 line 8).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from client_app.local_data import LocalData
from client_app.node import Node
from client_app.objective import ObjectiveFactory
from client_app.train_step import update_and_report
from methods.fedfsc.fewshot import FedFscSettings, FewShotResult, Role, train_fewshot_classifier, with_classifier_prox
from methods.fedfsc.records import (
    FEWSHOT,
    FEWSHOT_ANCHOR,
    FEWSHOT_CLASSES,
    FEWSHOT_CLASSIFIER,
    FEWSHOT_EXAMPLES,
    FEWSHOT_LOSS,
    FEWSHOT_METRICS,
    FEWSHOT_SECONDS,
    FEWSHOT_SHOTS_USED,
    FULL_EPOCHS,
)
from models import SplitModel
from models.device import synchronize
from models.outputs import penultimate_features
from protocol.messages import (
    ARRAYS,
    CONFIG,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
)

#: Separates the few-shot update's random stream from the normal update's (same seed, round and partition).
FEWSHOT_STREAM = 0xF5C


def read_role(config: ConfigRecord) -> Role:
    """The work a training message's config gives this client; an error naming the key when it is malformed."""
    epochs, fewshot = config.get(FULL_EPOCHS), config.get(FEWSHOT)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"training config '{FULL_EPOCHS}' must be an integer >= 0, got {epochs!r}")
    if not isinstance(fewshot, bool):
        raise ValueError(f"training config '{FEWSHOT}' must be true or false, got {fewshot!r}")
    if not epochs and not fewshot:
        raise ValueError("the training config gives this client no work")
    return Role(epochs, fewshot)


def fewshot_seed(seed: int, server_round: int, partition_id: int) -> int:
    """The few-shot update's seed: distinct per client and round, and from the normal update's."""
    return int(np.random.SeedSequence([seed, server_round, partition_id, FEWSHOT_STREAM]).generate_state(1)[0])


def fewshot_update(
    model: SplitModel, data: LocalData, settings: FedFscSettings, device: torch.device, batch_size: int, seed: int
) -> tuple[dict[str, torch.Tensor], FewShotResult]:
    """θ_fs,k: the received classifier fine-tuned on n shots per eligible class of φ's penultimate features."""
    model.to(device)
    features = torch.cat(
        [
            penultimate_features(model, data.inputs(device, start, start + batch_size), batch_size)
            for start in range(0, len(data), batch_size)
        ]
    )
    keys = model.classifier_keys()
    state = model.state_dict()
    weight, bias = (state[key] for key in keys)
    result = train_fewshot_classifier(
        features,
        data.labels.to(device),
        weight,
        bias,
        shots=settings.fewshot_shots,
        optimiser=settings.optimiser(),
        generator=torch.Generator().manual_seed(seed),
        resample_each_epoch=settings.fewshot_resample,
    )
    return {keys[0]: result.weight.cpu(), keys[1]: result.bias.cpu()}, result


def normal_objective(node: Node, msg: Message) -> ObjectiveFactory:
    """The base trainer's objective, with FSCProx (anchor θ_fs when the server sent one) or baseProx added."""
    settings = node.config.settings(FedFscSettings)
    base = node.objective
    if settings.fscprox == "base":
        return with_classifier_prox(base, None, settings.fscprox_mu)
    if settings.fscprox == "fewshot" and FEWSHOT_ANCHOR in msg.content.array_records:
        return with_classifier_prox(
            base, msg.content.array_records[FEWSHOT_ANCHOR].to_torch_state_dict(), settings.fscprox_mu
        )
    return base


@dataclass(frozen=True)
class FewShotReply:
    """What a few-shot update adds to the reply: the classifier and its numbers."""

    classifier: dict[str, torch.Tensor]
    result: FewShotResult
    loss: float
    seconds: float  # features and training

    @property
    def examples(self) -> int:
        return self.result.shots * self.result.classes

    def records(self) -> dict[str, ArrayRecord | MetricRecord]:
        numbers: dict[str, int | float | list[int] | list[float]] = {
            FEWSHOT_SHOTS_USED: self.result.shots,
            FEWSHOT_CLASSES: self.result.classes,
            FEWSHOT_EXAMPLES: self.examples,
            FEWSHOT_LOSS: self.loss,
            FEWSHOT_SECONDS: self.seconds,
        }
        return {FEWSHOT_CLASSIFIER: ArrayRecord(self.classifier), FEWSHOT_METRICS: MetricRecord(numbers)}


def timed_fewshot_update(node: Node, model: SplitModel, data: LocalData, server_round: int) -> FewShotReply:
    """The few-shot update of the received model, timed (the loss is read once, after training)."""
    tick = time.perf_counter()
    config = node.config
    seed = fewshot_seed(config.seed, server_round, node.partition_id)
    settings = config.settings(FedFscSettings)
    classifier, result = fewshot_update(model, data, settings, node.device, config.eval_batch_size, seed)
    loss = float(result.loss)
    synchronize(node.device)
    return FewShotReply(classifier, result, loss, time.perf_counter() - tick)


def fedfsc_train(node: Node, msg: Message) -> RecordDict:
    """The round's work as the message's config gives it: few-shot update, normal update, or both (few-shot first,
    on the model as received)."""
    role = read_role(msg.content.config_records[CONFIG])
    config = node.config
    data = node.data()
    model, phi_fingerprint = node.global_model(msg)
    server_round, _ = node.round_of(msg)
    few = timed_fewshot_update(node, model, data, server_round) if role.fewshot else None
    records: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {**(few.records() if few else {})}
    if role.epochs:
        arrays, metrics = update_and_report(
            node,
            msg,
            model,
            phi_fingerprint,
            data,
            config=dataclasses.replace(config, local_epochs=role.epochs),
            objective_factory=normal_objective(node, msg),
        )
        if few is not None:  # train-seconds is the client's whole round
            metrics[TRAIN_SECONDS] = float(metrics[TRAIN_SECONDS]) + few.seconds  # type: ignore[arg-type]
        records[ARRAYS], records[METRICS] = ArrayRecord(arrays), metrics
    elif few is not None:
        records[METRICS] = MetricRecord(
            {
                PARTITION_ID: node.partition_id,
                NUM_EXAMPLES: few.examples,
                NUM_LOCAL: len(data),
                TRAIN_LOSS: few.loss,
                TRAIN_SECONDS: few.seconds,
                THREADS: torch.get_num_threads(),
            }
        )
    return RecordDict(records)
