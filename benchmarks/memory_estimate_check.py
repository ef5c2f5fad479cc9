"""The start-time memory estimate against every simulation whose peak memory was measured on this code.

    python -m benchmarks.memory_estimate_check

Reads the runs recorded in ``measurements/benchmarks/`` (``cost_model.json``, the 100 to 10,000-client runs of
``profile.json``, ``scale-1000-after.json`` and the default runs of ``compare_default_full.json``), estimates each
from its run config and population as the launcher does (``simulation.memory_check``), and prints the estimate,
the measured peak (PSS summed over the run's processes) and their ratio. Measures nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from benchmarks import RESULTS_DIR
from run_config.overrides import config_with_overrides
from simulation.memory_check import simulation_size
from simulation.memory_estimate import estimate_peak

GIB = 2**30
#: Ray ClientApp actors of the recorded runs that do not say: one per CPU of the 2-core machine.
ACTORS = 2


@dataclass(frozen=True)
class RecordedRun:
    """A measured simulation: where it is recorded, its run config text, population and peak PSS, and the
    ``eval-batch-size`` it ran with (500, the default until 23 November 2026, for every run recorded here)."""

    source: str
    run_config: str
    num_supernodes: int
    actors: int
    peak_gib: float
    eval_batch_size: int = 500

    def estimate_gib(self) -> float:
        """The launcher's estimate for this run."""
        config = config_with_overrides(f"{self.run_config} eval-batch-size={self.eval_batch_size}")
        size = simulation_size(config, self.num_supernodes, self.actors)
        return estimate_peak(size).total / GIB


def _read(name: str) -> dict:
    return json.loads((RESULTS_DIR / name).read_text())


def recorded_runs() -> list[RecordedRun]:
    """Every recorded run of the current code with a peak and a known configuration."""
    runs = [
        RecordedRun(
            f"cost_model {r['method']} {r.get('model', 'lenet5')} {r['clients']}/{r['clients_per_round']}",
            f"{r['workload']} fraction-train={r['clients_per_round'] / r['clients']} num-server-rounds={r['rounds']}",
            r["clients"],
            r["peak_actors"],
            r["peak_memory_gib"],
        )
        for r in _read("cost_model.json")["runs"]
        if r["exit_code"] == 0
    ]
    runs += [
        RecordedRun(f"profile {label}", r["run_config"], r["num_supernodes"], ACTORS, r["peak_pss_gib"])
        for label, r in _read("profile.json").items()
        if label.startswith("scale-")
    ]
    after = _read("scale-1000-after.json")["runs"][0]
    runs.append(
        RecordedRun(
            "scale-1000-after",
            "dataset='fashion-mnist' dirichlet-alpha=0.5 pretrain='none' method='fedft-eds' fraction-train=0.01 "
            "num-server-rounds=3",
            1000,
            after["peak_actors"],
            after["peak_memory_gib"],
        )
    )
    default = _read("compare_default_full.json")
    runs += [
        RecordedRun(
            f"default run ({'cached' if r['cached'] else 'first, pretraining'})",
            default["run_config"],
            10,
            ACTORS,
            r["peak_pss_gib"],
        )
        for r in default["runs"]
        if r["checkout"] == "after"
    ]
    return runs


def main() -> None:
    print("| run | clients | estimate (GiB) | measured peak PSS (GiB) | estimate / measured |")
    print("|---|---|---|---|---|")
    for run in recorded_runs():
        estimate = run.estimate_gib()
        print(
            f"| {run.source} | {run.num_supernodes:,} | {estimate:.2f} | {run.peak_gib:.2f} "
            f"| {estimate / run.peak_gib:.2f} |"
        )


if __name__ == "__main__":
    main()
