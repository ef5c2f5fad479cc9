"""What a federated method is, to this app: a ``Method`` (name, presets, settings, client step, server step).

The shared machinery does everything methods have in common: the ServerApp's lifecycle (settings, pretraining,
rounds, evaluation, results, checkpoints; ``server_app/lifecycle.py``), cohorts by partition id and the checks on
every reply (``strategies/cohort_fedavg.py``, ``protocol/``), and the client's round (data, frozen features, data
selection, SGD; ``client_app/local_update.py``). A method says only what differs:

- ``presets``: its values of the composable axes (``freeze``, ``data-selection``, ``selection-fraction``,
  ``objective``), which the run config's ``"auto"`` keys take;
- ``settings``: dataclasses declaring its own settings (``run_config.settings.setting``), each with a ``NAMESPACE``
  (its package's name) that prefixes its keys (``fedprox.proximal-mu``);
- ``objectives``: local objectives it brings (FedProx's proximal term, MOON's contrastive loss;
  ``client_app/objective.py``), selectable by any method through the ``objective`` setting;
- ``client_train`` / ``strategy``: its client step and its server step (a Flower ``Strategy``), when the shared
  ones (the local update; ``PartialModelFedAvg``) do not fit;
- ``queries``: messages its server sends besides training (KAFAL's end-of-cycle query);
- ``check``: what its settings must satisfy together (a level the model lacks, a size larger than the model's
  features), and against the clients' data at start;
- ``check_run``: checks that need the population's size (the custom-size methods' client architectures, one per
  client), run when the run starts (a refused value stops the run before any training, naming the key);
- ``result_files``: its own files in the run folder (``server_app/result_files.py``: rows its server step reports,
  kept in checkpoints, summarised in summary.json, plotted), beside the framework's rounds.jsonl.

Client selection (``client-selection``) and the aggregation rule (``aggregation``) are axes of the shared server
step, so every method composes with FedEntOpt and the robust rules.

A method lives in ``methods/<name>.py`` or, when it has several parts, in ``methods/<name>/method.py``; either
module lists its methods in ``METHODS``, and ``methods/registry.py`` finds it there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from flwr.app import Message, RecordDict

from client_app.node import Node
from client_app.objective import ObjectiveFactory
from run_config import RunConfig
from run_config.catalogue import SettingsCheck, SettingValue
from run_config.settings import namespace_of
from server_app.lifecycle import FederatedRun
from server_app.result_files import ResultFile
from strategies.cohort_fedavg import CohortFedAvg

#: A method's answer to a message on a client: its client step, or its answer to a query it declares.
ClientStep = Callable[[Node, Message], RecordDict]
#: A method's server step: the Flower strategy that runs its rounds (cohorts, checked replies, aggregation).
ServerStep = Callable[[FederatedRun], CohortFedAvg]
#: A check that needs the population's size K: (configuration, K) -> None, raising ``ConfigError`` naming the key.
PopulationCheck = Callable[[RunConfig, int], None]


class MethodContractError(TypeError):
    """A method's declaration does not satisfy the contract (raised when the registry imports it)."""


@dataclass(frozen=True)
class Method:
    """A method: its name, what it sets, what it declares, and its client and server steps where they differ from
    the shared ones (None: shared)."""

    name: str
    summary: str
    presets: Mapping[str, SettingValue] = field(default_factory=dict)
    settings: tuple[type, ...] = ()
    objectives: Mapping[str, ObjectiveFactory] = field(default_factory=dict)
    #: None: the shared step (``client_app/train_step.py``).
    client_train: ClientStep | None = None
    #: None: ``PartialModelFedAvg`` (``server_app/lifecycle.py``).
    strategy: ServerStep | None = None
    #: Queries the method's server sends besides training: message type "query.<name>" -> the client's answer;
    #: declare their records in protocol/messages.py.
    queries: Mapping[str, ClientStep] = field(default_factory=dict)
    #: Checks of the settings that only this method needs: called with None whenever a configuration is parsed,
    #: and at the run's start with the samples each connected client holds (partition id -> count).
    check: SettingsCheck | None = None
    check_run: PopulationCheck | None = None
    #: Its own result files (KAFAL's cycles.jsonl); its server step reports their rows to ``run.recorder.report``.
    result_files: tuple[ResultFile, ...] = ()
    paper: str = ""

    def __post_init__(self) -> None:
        """Refuse, naming the part, a declaration that does not fit the contract."""
        problems = [
            f"'{part}' is not callable"
            for part in ("client_train", "strategy", "check", "check_run")
            if getattr(self, part) is not None and not callable(getattr(self, part))
        ]
        problems += [
            f"query {name!r} has no callable answer" for name, answer in self.queries.items() if not callable(answer)
        ]
        problems += [
            f"objective {name!r} is not callable" for name, factory in self.objectives.items() if not callable(factory)
        ]
        problems += [
            f"settings entry {cls!r} is not a dataclass"
            for cls in self.settings
            if not isinstance(cls, type) or not hasattr(cls, "__dataclass_fields__")
        ]
        problems += [
            f"settings class {cls.__name__} declares no NAMESPACE (its package's name, the prefix of its keys)"
            for cls in self.settings
            if isinstance(cls, type) and not namespace_of(cls)
        ]
        problems += [
            f"result file {file!r} is not a server_app.result_files.ResultFile"
            for file in self.result_files
            if not isinstance(file, ResultFile)
        ]
        if not self.name or not self.summary:
            problems.append("it needs a 'name' and a 'summary'")
        if problems:
            raise MethodContractError(f"method {self.name!r}: {'; '.join(problems)}")
