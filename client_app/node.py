"""What a client node knows when a message arrives: the run's configuration as this node applies it, its partition,
device and data, and the global model the message carries (with the φ it keeps in ``context.state``).

Every handler of the ClientApp and every method's client step reads these through a ``Node``, so the node-local
settings, the φ bookkeeping and the data loading are written once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from client_app.fault_injection import POISONED_LABELS, flipped_labels
from client_app.feature_cache import fingerprint
from client_app.local_data import LocalData, load_local_data, load_node_local_data
from client_app.objective import ObjectiveFactory
from client_app.threads import use_threads
from data.catalog import DatasetInfo
from data.federated import client_partition_labels
from data.node_data import node_dataset_info, read_node_data
from data.own_data import is_own_dataset
from models import NO_FREEZE, SplitModel
from models.device import resolve_device
from protocol.messages import ARRAYS, CONFIG, FROZEN, LEARNING_RATE, LOCAL_EPOCHS, SERVER_ROUND
from run_config import RunConfig, build_model_for, data_cache, dataset_info, federated_split, parse_run_config
from run_config.catalogue import Catalogue
from run_config.derived import columns
from run_config.settings import declared_settings
from strategies.partial_model import merge_state

#: Settings that describe a node's hardware (declared with ``node=True``): a SuperNode's node config may set its own.
NODE_LOCAL_SETTINGS = tuple(s.key for s in declared_settings(RunConfig) if s.node)
#: What this node keeps about φ in ``context.state``: its fingerprint (features cached under another φ are stale).
FROZEN_INFO, FINGERPRINT = "frozen-info", "fingerprint"


class MissingFrozenPartError(RuntimeError):
    """θ arrived but this node holds no φ; the server resends φ after this error."""


class DecodedFrozenParts:
    """φ as tensors, decoded from a node's ``context.state`` once per φ (by its fingerprint) and process.

    Every node of a run holds the same φ, and a simulation runs many nodes in one process (the in-process runner, a
    Ray actor), so decoding each node's copy at each of its messages repeats the same work; the tensors are only read
    (``load_state_dict`` copies them into the model). A few entries: a new φ (a new run) replaces the oldest."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._decoded: dict[str, dict[str, torch.Tensor]] = {}

    def get(self, fingerprint: str, held: ArrayRecord) -> dict[str, torch.Tensor]:
        decoded = self._decoded.get(fingerprint)
        if decoded is None:
            decoded = held.to_torch_state_dict()
            self.keep(fingerprint, decoded)
        return decoded

    def keep(self, fingerprint: str, decoded: dict[str, torch.Tensor]) -> None:
        """Hold a φ decoded elsewhere (on its arrival, for its fingerprint), so that ``get`` need not decode it."""
        if fingerprint not in self._decoded and len(self._decoded) >= self.size:
            self._decoded.pop(next(iter(self._decoded)))
        self._decoded[fingerprint] = decoded


#: This process's decoded φ (``Node.global_model``).
DECODED_FROZEN = DecodedFrozenParts()


@functools.lru_cache(maxsize=4)
def _parse(items: tuple, catalogue: Catalogue) -> RunConfig:
    return parse_run_config(dict(items), catalogue)


def node_config(context: Context, catalogue: Catalogue) -> RunConfig:
    """The run's configuration with this node's own values of the node-local settings (a small device sets a
    lower ``feature-cache-mb`` and ``eval-batch-size`` to bound its memory, a Jetson ``device = cuda``)."""
    config = _parse(tuple(sorted(context.run_config.items())), catalogue)
    own = {key: context.node_config[key] for key in NODE_LOCAL_SETTINGS if key in context.node_config}
    if not own:
        return config
    try:
        return parse_run_config({**config.to_dict(), **own}, catalogue)
    except ValueError as err:
        raise ValueError(f"node config: {err}") from None


class Node:
    """One client node, as one message finds it: ``catalogue`` and ``objectives`` are the methods' declarations and
    local objectives, which the ClientApp reads from the method registry."""

    def __init__(self, context: Context, catalogue: Catalogue, objectives: Mapping[str, ObjectiveFactory]) -> None:
        self.context = context
        self.config = node_config(context, catalogue)
        self.objective: ObjectiveFactory = objectives[self.config.objective]
        use_threads(self.config.client_threads)
        self.partition_id = int(context.node_config["partition-id"])
        self.num_partitions = int(context.node_config["num-partitions"])
        self.data_path = str(context.node_config.get("data-path", ""))
        #: a data-poisoning node (testing only; ``client_app/fault_injection.py``) trains on flipped labels
        self.poisoned_labels = bool(context.node_config.get(POISONED_LABELS, False))
        if self.data_path and is_own_dataset(self.config.dataset):  # what its folder says of the user's data
            node_dataset_info(Path(self.data_path).expanduser(), self.config.dataset, columns(self.config))

    @property
    def info(self) -> DatasetInfo:
        """What the models need of the run's dataset (of a user's own data, on a deployed node: its folder's say)."""
        return dataset_info(self.config)

    @property
    def state(self) -> RecordDict:
        """What this node keeps across the run's messages (Flower's ``context.state``)."""
        return self.context.state

    @functools.cached_property
    def device(self) -> torch.device:
        """The node's ``device``; an error naming the key and what torch sees when this node lacks it."""
        where = "node config" if "device" in self.context.node_config else "run config"
        return resolve_device(self.config.device, key=f"{where} 'device'")

    def data(self) -> LocalData:
        """This node's data: its ``data-path`` folder when deployed with one, else its cut of the shared dataset."""
        if self.data_path:
            data = load_node_local_data(self.data_path, self.config.dataset, columns(self.config))
        else:
            split = federated_split(self.config)
            data = load_local_data(split, self.partition_id, self.num_partitions, data_cache(self.config))
        return flipped_labels(data, self.info.num_classes) if self.poisoned_labels else data

    def labels(self) -> np.ndarray:
        """This node's labels only, so answering a query leaves no images in memory."""
        if self.data_path:
            return read_node_data(Path(self.data_path).expanduser(), self.config.dataset, columns(self.config)).labels
        return client_partition_labels(
            federated_split(self.config), self.partition_id, self.num_partitions, data_cache(self.config)
        )

    def global_model(self, msg: Message) -> tuple[SplitModel, str]:
        """The full global model from the received θ and the held φ (kept first if it came along), and φ's
        fingerprint (empty without a frozen part)."""
        model = build_model_for(self.config)
        if FROZEN in msg.content.array_records:
            frozen = msg.content.array_records[FROZEN]
            self.state[FROZEN] = frozen
            decoded = frozen.to_torch_state_dict()
            arrived = fingerprint(decoded)
            DECODED_FROZEN.keep(arrived, decoded)  # decoded once: for its fingerprint and for the messages to come
            self.state[FROZEN_INFO] = ConfigRecord({FINGERPRINT: arrived})
        trained = msg.content.array_records[ARRAYS].to_torch_state_dict()
        if self.config.freeze == NO_FREEZE:
            model.load_state_dict(trained)
            return model, ""
        if FROZEN not in self.state.array_records:
            raise MissingFrozenPartError("this node holds no frozen part φ; it will be sent with the next request")
        phi_fingerprint = str(self.state.config_records[FROZEN_INFO][FINGERPRINT])
        held = DECODED_FROZEN.get(phi_fingerprint, self.state.array_records[FROZEN])
        model.load_state_dict(merge_state(held, trained, model.state_dict().keys()))
        return model, phi_fingerprint

    @staticmethod
    def round_of(msg: Message) -> tuple[int, float]:
        """The server round and the learning rate a training message sets."""
        config = msg.content.config_records[CONFIG]
        return int(config[SERVER_ROUND]), float(config[LEARNING_RATE])  # type: ignore[arg-type]

    def local_epochs(self, msg: Message) -> int:
        """This round's local epochs: the message's own (a straggler doing partial work), else ``local-epochs``."""
        config = msg.content.config_records[CONFIG]
        return int(config[LOCAL_EPOCHS]) if LOCAL_EPOCHS in config else self.config.local_epochs  # type: ignore[arg-type]
