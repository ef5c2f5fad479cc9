"""The server side of custom-size client models (thesis Ch. 5): a strategy that keeps every client's own model and
sends each client its own, and nothing else.

``ClientModelFedAvg`` extends ``CohortFedAvg`` (cohorts, checked replies, per-round reports):

- it asks each new client which architecture it trains (``query.client_model``) and refuses a name the app cannot
  build or that cannot pair with the global model (``pairs``); a refused client is left out of selection;
- a client's first model is freshly built from (seed, partition); a training message carries that client's model
  (every array of it) and its architecture's name, and, in its first round, ``common.client-init-epochs`` more epochs;
- a reply's arrays are checked against the model that client was sent (``CohortFedAvg._expected_from``);
- the method's server step (``aggregate_arrays``) updates the global model and writes each client's next model
  with ``keep_client_model``; ``state_dict`` holds every client model for the checkpoint;
- ``ClientEvaluation`` scores client models on a fixed slice of the test set (FedMD (clients) reports their mean).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from logging import WARNING
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from models import SplitModel
from models.training import evaluate
from protocol.messages import ARRAYS, CLIENT_MODEL, CONFIG, LOCAL_EPOCHS, MODEL_NAME
from protocol.replies import read_client_model, refusal
from strategies.client_errors import error_summary
from strategies.cohort_fedavg import CohortFedAvg, RoundReplies

#: (architecture name, seed or None: leave the random state alone) -> a freshly initialised model of it, on the CPU
BuildModel = Callable[[str, "int | None"], SplitModel]
State = dict[str, torch.Tensor]


def cpu_state(model: torch.nn.Module) -> State:
    """A detached CPU copy of a model's state."""
    return {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}


class ClientEvaluation:
    """Test accuracy of client models on the first ``samples`` of a seeded permutation of the test set."""

    def __init__(
        self, inputs: torch.Tensor, labels: torch.Tensor, samples: int, seed: int, batch_size: int, device: torch.device
    ) -> None:
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:samples]
        self.inputs, self.labels = inputs[order].to(device), labels[order].to(device)
        self.batch_size, self.device = batch_size, device

    def accuracy(self, model: SplitModel) -> float:
        model.to(self.device).eval()
        return evaluate(model, self.inputs, self.labels, self.batch_size)[1]


class ClientModelFedAvg(CohortFedAvg):
    """CohortFedAvg whose clients each train their own architecture, kept on the server between rounds."""

    def __init__(
        self,
        *,
        build: BuildModel,
        global_name: str,
        pairs: Callable[[str], None],
        init_epochs: int = 0,
        client_evaluation: ClientEvaluation | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.build, self.global_name, self.pairs, self.init_epochs = build, global_name, pairs, init_epochs
        self.current_round = 0  # the run's number of the round being configured or aggregated
        self.client_evaluation = client_evaluation
        self.architecture: dict[int, str] = {}  # partition id -> the architecture it trains
        self.refused_models: dict[int, str] = {}  # partition id -> why its architecture was refused
        self.client_states: dict[int, State] = {}  # partition id -> its model (what it is sent next)
        self.initialised: set[int] = set()  # clients whose first round was accepted (initialisation done)

    # Which architecture each client trains.

    def available(self, grid: Grid) -> list[int]:
        """Connected clients with label counts and a usable architecture (new clients are asked first)."""
        usable = super().available(grid)
        todo = [pid for pid in usable if pid not in self.architecture and pid not in self.refused_models]
        if todo:
            self._ask_architectures(grid, todo)
        return [pid for pid in usable if pid in self.architecture]

    def _ask_architectures(self, grid: Grid, partition_ids: list[int]) -> None:
        nodes = {self.population.node_of(pid): pid for pid in partition_ids}
        messages = [
            Message(RecordDict({CONFIG: ConfigRecord({})}), message_type=CLIENT_MODEL, dst_node_id=node)
            for node in nodes
        ]
        for reply in grid.send_and_receive(messages, timeout=self.label_counts.reply_timeout):
            pid = nodes.get(reply.metadata.src_node_id)
            if pid is None or pid in self.architecture:
                continue
            name: str | None
            reason: str | None
            if reply.has_error():
                name, reason = None, f"error reply: {error_summary(reply.error.reason or '')}"
            else:
                name, reason = refusal(read_client_model, reply.content, self.pairs)
            if name is None:
                log(WARNING, "partition %d: unusable client model (%s); it is left out of selection", pid, reason)
                self.refused_models[pid] = reason or "unreadable"
            else:
                self.architecture[pid] = name
        for pid in partition_ids:
            if pid not in self.architecture and pid not in self.refused_models:
                self.refused_models[pid] = "no reply to query.client_model"

    # What each client is sent.

    def configure_round(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self.current_round = server_round
        return super().configure_round(server_round, arrays, config, grid)

    def global_model(self) -> SplitModel:
        """The round's global model w_g^t (what ``configure_round`` received), on the CPU."""
        model = self.build(self.global_name, None)
        model.load_state_dict(self._sent.to_torch_state_dict())
        return model

    def first_client_state(self, partition_id: int) -> State:
        """``partition_id``'s first model: freshly built from (seed, partition). A method may start it otherwise."""
        seed = int(np.random.SeedSequence([self.seed, partition_id, 0xC11E]).generate_state(1)[0])
        return cpu_state(self.build(self.architecture[partition_id], seed))

    def client_state(self, partition_id: int) -> State:
        """The model ``partition_id`` is sent next (its first: ``first_client_state``)."""
        if partition_id not in self.client_states:
            self.client_states[partition_id] = self.first_client_state(partition_id)
        return self.client_states[partition_id]

    def client_model(self, partition_id: int, state: Mapping[str, torch.Tensor] | None = None) -> SplitModel:
        """A model of ``partition_id``'s architecture holding ``state`` (default: its kept model)."""
        model = self.build(self.architecture[partition_id], None)
        model.load_state_dict(dict(state if state is not None else self.client_state(partition_id)))
        return model

    def keep_client_model(self, partition_id: int, model: torch.nn.Module) -> None:
        """What ``partition_id`` is sent next round (the method's server-side update of its model)."""
        self.client_states[partition_id] = cpu_state(model)

    def train_records_for(self, partition_id: int, arrays: ArrayRecord) -> dict[str, ArrayRecord]:
        """A client's own model, and no global array."""
        return {ARRAYS: ArrayRecord(self.client_state(partition_id))}

    def config_for(self, partition_id: int, config: ConfigRecord) -> ConfigRecord:
        """The round's config with the client's architecture and, in its first round, the initialisation epochs."""
        own = super().config_for(partition_id, config)
        extra: dict[str, Any] = {MODEL_NAME: self.architecture[partition_id]}
        if self.init_epochs and partition_id not in self.initialised:
            epochs = own[LOCAL_EPOCHS] if LOCAL_EPOCHS in own else self.local_epochs
            extra[LOCAL_EPOCHS] = int(epochs) + self.init_epochs  # type: ignore[arg-type]
        return ConfigRecord({**own, **extra})

    def replies_sorted(self, outcome: RoundReplies) -> None:
        """A client whose reply was accepted has done its initialisation."""
        super().replies_sorted(outcome)
        self.initialised.update(outcome.accepted)

    # Reports and the checkpoint.

    def client_accuracies(self, partition_ids: list[int]) -> dict[str, Any]:
        """Test accuracy of the kept models of ``partition_ids`` and their mean (empty when evaluation is off)."""
        if self.client_evaluation is None or not partition_ids:
            return {}
        scores = {pid: self.client_evaluation.accuracy(self.client_model(pid)) for pid in partition_ids}
        return {
            "client_accuracy_mean": float(np.mean(list(scores.values()))),
            "client_accuracies": {str(pid): score for pid, score in scores.items()},
        }

    def state_dict(self) -> dict[str, Any]:
        """Every client's model and architecture and who is initialised (the checkpoint's strategy state)."""
        return {
            "client_states": {str(pid): state for pid, state in self.client_states.items()},
            "architecture": {str(pid): name for pid, name in self.architecture.items()},
            "initialised": sorted(self.initialised),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Go on from a checkpoint's ``state_dict`` (nothing to restore when the run starts afresh)."""
        if not state:
            return
        self.client_states = {int(pid): dict(s) for pid, s in state["client_states"].items()}
        self.architecture = {int(pid): str(name) for pid, name in state["architecture"].items()}
        self.initialised = set(state["initialised"])
