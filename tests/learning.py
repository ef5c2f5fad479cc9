"""The learns-tests' shared task: a method runs in one process (``tests/in_process.py``) on a small task that it must
learn, and fails its test when its global model ends at chance or far below its start.

The task: Fashion-MNIST-mini over 4 clients (Dir(0.5)), LeNet-5, one thread. The initial model is pretrained on
2,000 MNIST images, another domain, with a new classifier head (as the FedFT-EDS paper pretrains on Small ImageNet for
CIFAR, §V-A), so the start is near chance and a method has to learn from its clients; methods whose papers start
from random weights set ``pretrain = "none"``. The pretraining is cached once per test session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.in_process import run_in_process, small_run_config

#: Chance level of the task (10 classes).
CHANCE = 0.1
#: The task every learns-test starts from (a method's test adds its own settings).
TASK: dict[str, Any] = {
    "dataset": "fashion-mnist-mini",
    "model": "lenet5",
    "pretrain": "dataset",
    "pretrain-dataset": "mnist",
    "pretrain-samples": 2000,
    "pretrain-epochs": 3,
    "num-server-rounds": 4,
    "local-epochs": 1,
    "batch-size": 32,
    "aggregation": "mean",
}


@dataclass(frozen=True)
class Outcome:
    """What a learns-test run reached."""

    initial: float
    accuracies: list[float]
    summary: dict[str, Any]

    @property
    def final(self) -> float:
        return self.accuracies[-1]

    def describe(self) -> str:
        return f"start {self.initial:.3f}, rounds {[round(a, 3) for a in self.accuracies]}"


def run_method(tmp_path: Path, pretrained: Path, clients: int = 4, **overrides: Any) -> Outcome:
    """Run the task with ``overrides`` (run-config keys) over ``clients`` clients; ``pretrained`` is the session's
    pretraining cache."""
    config = small_run_config(tmp_path, **{**TASK, "pretrain-cache-dir": str(pretrained), **overrides})
    run_in_process(config, clients)
    folder = Path(config["results-dir"]) / config["run-name"]
    summary = json.loads((folder / "summary.json").read_text())
    records = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    rounds = [r for r in records if "phase" not in r]  # the pretraining round's record, where the run has one
    return Outcome(summary["initial_accuracy"], [r["accuracy"] for r in rounds], summary)


def assert_learns(outcome: Outcome, *, at_least: float, also: Mapping[str, float] | None = None) -> None:
    """The global model ends at ``at_least`` or above (well above chance), with no collapse warning; each summary
    field of ``also`` (a model the method adds: FedSplit's composed model, FedMD's clients) reaches its minimum."""
    assert outcome.final >= at_least, f"ended at {outcome.final:.3f} < {at_least}: {outcome.describe()}"
    assert outcome.final > outcome.initial, f"ended at or below its start: {outcome.describe()}"
    assert not outcome.summary["warnings"], f"{outcome.summary['warnings']}: {outcome.describe()}"
    for field, minimum in (also or {}).items():
        value = outcome.summary.get(field)
        assert value is not None and value >= minimum, f"{field} = {value} < {minimum}: {outcome.describe()}"
