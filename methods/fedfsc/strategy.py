"""The server step of the FedFSC family (methods/fedfsc/method.py): roles, the base model, the few-shot classifier and
the global model {θ_fs^t, φ^t}.

Each round the selection policy picks the non-stragglers (``fraction-train``); methods with stragglers draw a
further ``fedfsc.fewshot-fraction`` of the pool from the rest. Every participant is told its work in its message's
config (``full-epochs``, ``fewshot``; ``methods.fedfsc.fewshot.assign_roles``). The replies of normal updates are
aggregated into the new base model {θ^{t+1}, φ^{t+1}} under the ``aggregation`` rule, weighted by their sample counts,
exactly as FedAvg; the few-shot classifiers are averaged **uniformly** (eq. 4.2; under a robust rule, that rule with
equal weights) and put on the base model distributed this round: the global model w_g^t = {θ_fs^t, φ^t}. Flower carries
the base model into the next round (it is what clients train on); the run evaluates, records and saves the
global model (``global_arrays``), and records the base model's accuracy and each few-shot classifier's beside it.
With FSCProx, the latest θ_fs goes to the normal updates as their regulariser's anchor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from logging import WARNING
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from methods.fedfsc.fewshot import (
    FedFscSettings,
    Role,
    RolePlan,
    assign_roles,
    average_fewshot_classifiers,
    compose_global_state,
    draw_stragglers,
)
from methods.fedfsc.records import FEWSHOT, FEWSHOT_ANCHOR, FEWSHOT_CLASSIFIER, FULL_EPOCHS, read_fedfsc_reply
from protocol.messages import ARRAYS, CONFIG, METRICS
from protocol.replies import ArraySpec, array_specs
from run_config import build_model_for
from run_config.choices import MEAN
from strategies.partial_fedavg import PartialModelFedAvg
from strategies.robust_aggregation import min_clients, robust_aggregate
from strategies.stragglers import select_stragglers

if TYPE_CHECKING:
    from server_app.lifecycle import FederatedRun
    from strategies.central_evaluation import CentralEvaluation

State = dict[str, torch.Tensor]


class FewShotClassifierFedAvg(PartialModelFedAvg):
    """PartialModelFedAvg whose participants have roles and whose global model takes the few-shot classifier."""

    def __init__(
        self,
        *,
        plan: RolePlan,
        settings: FedFscSettings,
        classifier_keys: list[str],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)  # sets local_epochs, the run's E
        self.plan, self.settings = plan, settings
        self.classifier_keys = classifier_keys
        self._roles: dict[int, Role] = {}
        self._fewshot: State | None = None  # θ_fs of the latest round with few-shot updates (FSCProx's anchor)
        self._global: ArrayRecord | None = None  # this round's {θ_fs^t, φ^t}; None: the base model is the global one
        self._fewshot_base = ArrayRecord()  # the base the round's few-shot classifiers were trained on
        self._client_classifiers: dict[int, State] = {}
        self._classifier_specs: dict[str, ArraySpec] = {}  # what a few-shot reply's classifier must match

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Pick the non-stragglers (the selection policy), draw the stragglers, give each participant its role."""
        pool = self.available(grid)
        selected = self.select(pool, server_round)
        dropped = select_stragglers(selected, self.straggler_fraction, self.seed, server_round)
        non_stragglers = [pid for pid in selected if pid not in dropped]
        stragglers = (
            draw_stragglers(pool, selected, self.settings.fewshot_fraction, self.seed, server_round)
            if self.plan.uses_stragglers
            else []
        )
        self._roles = assign_roles(
            self.plan, non_stragglers, stragglers, server_round, self.local_epochs, self.settings.straggler_epochs
        )
        self._classifier_specs = array_specs(ArrayRecord({key: arrays[key] for key in self.classifier_keys}))
        return self.send_work(
            server_round,
            list(self._roles),
            arrays,
            config,
            dropped=dropped,
            fewshot_clients=sorted(pid for pid, role in self._roles.items() if role.fewshot),
            reduced_clients=sorted(pid for pid, role in self._roles.items() if 0 < role.epochs < self.local_epochs),
            **straggler_fields(pool, non_stragglers, stragglers, self._roles),
        )

    def train_content(self, partition_id: int, arrays: ArrayRecord, config: ConfigRecord) -> RecordDict:
        """The base model (and φ once), the client's role in the config, and FSCProx's anchor for normal updates."""
        content = super().train_content(partition_id, arrays, config)
        role = self._roles[partition_id]
        content[CONFIG] = ConfigRecord({**config, FULL_EPOCHS: role.epochs, FEWSHOT: role.fewshot})
        if role.epochs and self.settings.fscprox == "fewshot" and self._fewshot is not None:
            content[FEWSHOT_ANCHOR] = ArrayRecord(self._fewshot)
        return content

    def check_reply(self, partition_id: int, content: RecordDict) -> None:
        """A reply holds what its client's role asks for, each part sound (``protocol.replies.read_fedfsc_reply``)."""
        role = self._roles[partition_id]
        identity = self.population.identity_of(partition_id)
        read_fedfsc_reply(
            content,
            full=role.epochs > 0,
            fewshot=role.fewshot,
            expected=self._expected_from[partition_id],
            classifier=self._classifier_specs,
            identity=identity,
            expected_examples=self.expected_examples(identity.num_examples),
            max_shots=self.settings.fewshot_shots,
        )

    def aggregate_arrays(self, contents: list[RecordDict], partition_ids: list[int]) -> tuple[ArrayRecord, dict]:
        """The new base model from the normal updates (unchanged when none arrived); the few-shot classifiers
        averaged and composed with the base they were trained on into the round's global model."""
        full = [
            (RecordDict({ARRAYS: c.array_records[ARRAYS], METRICS: c.metric_records[METRICS]}), pid)
            for c, pid in zip(contents, partition_ids)
            if ARRAYS in c.array_records
        ]
        if full:  # only θ and its weight: Flower's mean averages every array record of a reply
            arrays, report = super().aggregate_arrays([c for c, _ in full], [pid for _, pid in full])
        else:
            arrays, report = self._sent, {}
        classifiers = {
            pid: dict(c.array_records[FEWSHOT_CLASSIFIER].to_torch_state_dict())
            for c, pid in zip(contents, partition_ids)
            if FEWSHOT_CLASSIFIER in c.array_records
        }
        averaged = self.aggregate_classifiers(list(classifiers.values())) if classifiers else None
        self._global = None
        if averaged is not None:
            self._fewshot, self._client_classifiers, self._fewshot_base = averaged, classifiers, self._sent
            self._global = ArrayRecord(compose_global_state(self._sent.to_torch_state_dict(), averaged))
        return arrays, {**report, "base_updates": len(full), "fewshot_updates": len(classifiers)}

    def aggregate_classifiers(self, classifiers: list[State]) -> State | None:
        """θ_fs^t: the uniform mean (eq. 4.2), or under a robust rule that rule with equal weights; None when the
        rule needs more classifiers than arrived (the round's global model is then the base model)."""
        if self.aggregation.rule == MEAN:
            return average_fewshot_classifiers(classifiers)
        if len(classifiers) < min_clients(self.aggregation):
            log(
                WARNING, "%d few-shot classifiers are too few for %s: not used", len(classifiers), self.aggregation.rule
            )
            return None
        sent = {key: self._sent[key].numpy() for key in self.classifier_keys}
        arrays = [{key: value.numpy() for key, value in c.items()} for c in classifiers]
        result = robust_aggregate(self.aggregation, arrays, [1.0] * len(arrays), sent)
        return {key: torch.from_numpy(np.asarray(value)) for key, value in result.arrays.items()}

    def configure_evaluation(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Clients evaluate the global model, not the base model."""
        return super().configure_evaluation(server_round, self.global_arrays(arrays), config, grid)

    def global_arrays(self, carried: ArrayRecord) -> ArrayRecord:
        """{θ_fs^t, φ^t} after a round with few-shot classifiers, else the base model ``carried``."""
        return self._global if self._global is not None else carried

    def round_evaluation(self, carried: ArrayRecord, evaluate: CentralEvaluation) -> dict[str, Any]:
        """The base model's test loss and accuracy, and each few-shot classifier's test accuracy on the extractor
        it was trained on (the thesis's Fig. 4.3: few-shot updated client models)."""
        base_loss, base_accuracy = evaluate(carried)
        fields: dict[str, Any] = {"base_loss": base_loss, "base_accuracy": base_accuracy}
        if self._global is not None:
            pids = sorted(self._client_classifiers)
            classifiers = [tuple(self._client_classifiers[pid][k] for k in self.classifier_keys) for pid in pids]
            accuracies = evaluate.classifier_accuracies(self._fewshot_base, classifiers)  # type: ignore[arg-type]
            fields["fewshot_client_accuracies"] = [
                {"partition_id": pid, "accuracy": accuracy} for pid, accuracy in zip(pids, accuracies)
            ]
            fields["fewshot_client_mean_accuracy"] = float(np.mean(accuracies))
        return fields

    def state_dict(self) -> dict[str, Any]:
        """θ_fs (FSCProx's next anchor) and the global model, for a resumed run."""
        return {
            "fewshot": self._fewshot,
            "global": self._global.to_torch_state_dict() if self._global is not None else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._fewshot = state.get("fewshot")
        held = state.get("global")
        self._global = ArrayRecord(held) if held is not None else None


def straggler_fields(
    pool: Iterable[int], non_stragglers: Iterable[int], stragglers: Iterable[int], roles: Mapping[int, Role]
) -> dict[str, list[int]]:
    """What happened to the round's stragglers (thesis §4.5.2: every client outside the non-stragglers is one):
    ``stragglers_used``, those of the f_fs draw that got work (a few-shot update, E_r epochs or both), and
    ``stragglers_dropped``, every other client of the pool outside the non-stragglers (all of them for FedFSC,
    Alg. 1; in round 1 also FedFSC+'s draw, which has no work before its first few-shot round)."""
    cohort = set(non_stragglers)
    return {
        "stragglers_used": sorted(pid for pid in stragglers if pid in roles and pid not in cohort),
        "stragglers_dropped": sorted(pid for pid in set(pool) - cohort if pid not in roles),
    }


def fewshot_classifier_strategy(run: FederatedRun, plan: RolePlan) -> FewShotClassifierFedAvg:
    """The FedFSC-family strategy for a run: the shared strategy's arguments plus the method's plan and settings."""
    return FewShotClassifierFedAvg(
        plan=plan,
        settings=run.config.settings(FedFscSettings),
        classifier_keys=build_model_for(run.config).classifier_keys(),
        **run.strategy_arguments(),
    )
