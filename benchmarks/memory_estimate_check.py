"""The start-time memory estimate against every simulation whose peak memory was measured on this code.

    python -m benchmarks.memory_estimate_check          # the estimate against every recorded run
    python -m benchmarks.memory_estimate_check --fit    # derive the fitted constants again from those runs
    python -m benchmarks.memory_estimate_check --leave-one-out   # each run estimated by a fit without it

Reads the runs recorded in ``measurements/benchmarks/`` since the fourth performance pass (``cost_model.json``'s
grid, the 10-client scale runs of ``scale10_memory.json`` at the pass's final commit, and the default runs of
``compare_default_fourth.json``), estimates each from its run config and population as the launcher does
(``simulation.memory_check``), and prints the estimate, the measured peak (PSS summed over the run's processes) and
their ratio. Measures nothing. Runs of older code (``cost_model_third_pass.json``, ``profile.json``) held more and
are left out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from benchmarks import RESULTS_DIR
from benchmarks.scale import SCALE_WORKLOAD
from methods.registry import config_with_overrides
from simulation.memory_check import simulation_size
from simulation.memory_estimate import FITTED, MIB, FittedConstants, SimulationSize, estimate_peak

GIB = 2**30
#: Ray ClientApp actors of the recorded runs that do not say: one per CPU of the 2-core machine.
ACTORS = 2
#: The commit whose 10-client scale runs in ``scale10_memory.json`` are the current code's (the fourth pass's last
#: change to what a simulation holds: the feature cache's mapped files).
FOURTH_PASS_COMMIT = "9e0ccf5"


@dataclass(frozen=True)
class RecordedRun:
    """A measured simulation: where it is recorded, its run config text, population, peak PSS and what the peak
    was made of (MiB per process kind, ``benchmarks.process_memory.SIMULATION_KINDS``)."""

    source: str
    run_config: str
    num_supernodes: int
    actors: int
    peak_gib: float
    peak_by_kind_mib: dict[str, float] = field(default_factory=dict)
    #: The server pretrained during this run (the first run of a configuration that pretrains; later runs start
    #: from the cached weights).
    pretrains_in_run: bool = False

    def size(self) -> SimulationSize:
        """What the launcher estimates this run from."""
        config = config_with_overrides(self.run_config)
        return simulation_size(config, self.num_supernodes, self.actors, pretrains=self.pretrains_in_run)

    def estimate_gib(self, constants: FittedConstants = FITTED) -> float:
        """The launcher's estimate for this run."""
        return estimate_peak(self.size(), constants).total / GIB


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
            r["peak_by_kind_mib"],
        )
        for r in _read("cost_model.json")["runs"]
        if r["exit_code"] == 0
    ]
    runs += [
        RecordedRun(
            f"scale {r['clients']}/{r['clients_per_round']} ({r['file']})",
            f"{SCALE_WORKLOAD} fraction-train={r['clients_per_round'] / r['clients']} num-server-rounds=3",
            r["clients"],
            r["peak_actors"],
            r["peak_memory_gib"],
            r["peak_by_kind_mib"],
        )
        for r in _read("scale10_memory.json")["runs"]
        if r["commit"] == FOURTH_PASS_COMMIT and not r["environment"] and r["exit_code"] == 0
    ]
    default = _read("compare_default_fourth.json")
    runs += [
        RecordedRun(
            f"default run ({'cached' if r['cached'] else 'first, pretraining'}, cycle {r['cycle']})",
            default["run_config"],
            10,
            ACTORS,
            r["peak_pss_gib"],
            r["peak_pss_by_kind_mib"],
            pretrains_in_run=not r["cached"],
        )
        for r in default["runs"]
        if r["checkout"] == "after" and r["exit_code"] == 0
    ]
    return runs


#: ``peak_by_kind_mib``'s names for the ClientApp actors and the simulation engine; every other kind is platform.
ACTOR_KIND, ENGINE_KIND = "client actor", "simulation engine"
#: The copy counts ``fit`` tries: at least one of each buffer, which each step does hold (with 0 allowed, these runs
#: cannot tell the training activations from the bases, and the fit drops them).
COPY_CHOICES = {
    "client_data_copies": range(1, 13),
    "training_activation_copies": range(1, 5),
    "forward_activation_copies": range(1, 7),
    "reply_copies": range(1, 13),
}
#: Bases ``fit`` tries for an actor and for the engine: 0 to 1,000 MiB in steps of 10.
BASES = np.arange(0, 1001, 10) * MIB


def _least_worst_base(parts: np.ndarray, measured: np.ndarray) -> tuple[int, np.ndarray]:
    """The base from ``BASES`` whose addition to each estimated part gives the least worst |log| ratio to the
    measured part, and the parts with it added."""
    worst = np.abs(np.log((BASES[:, None] + parts[None, :]) / measured[None, :])).max(axis=1)
    base = int(BASES[int(worst.argmin())])
    return base, parts + base


def fit(runs: list[RecordedRun]) -> FittedConstants:
    """The fitted constants for ``runs`` (the module docstring of ``simulation.memory_estimate`` says how). The
    estimate is linear in each constant, so every run's parts are computed once per constant and combined."""
    sizes = [run.size() for run in runs]
    kinds = [{kind: mib * MIB for kind, mib in run.peak_by_kind_mib.items()} for run in runs]
    actors = np.array([size.concurrent_clients for size in sizes], dtype=float)
    # The mapped dataset is its own term of the estimate; PSS spreads it over the engine and the actors that read it.
    dataset_share = np.array([size.dataset_bytes for size in sizes]) / (actors + 1)
    measured_actors = np.array([k[ACTOR_KIND] for k in kinds]) - actors * dataset_share
    measured_engine = np.array([k[ENGINE_KIND] for k in kinds]) - dataset_share
    measured_total = np.array([run.peak_gib * GIB for run in runs])
    platform = round(statistics.median(sum(k.values()) - k[ACTOR_KIND] - k[ENGINE_KIND] for k in kinds) / MIB) * MIB

    def parts(constants: FittedConstants) -> np.ndarray:
        """Per run: the actors' part, the engine's part, and the rest of the estimate."""
        estimates = [estimate_peak(size, constants) for size in sizes]
        return np.array([(e.clients, e.server + e.per_node, e.platform + e.dataset) for e in estimates], dtype=float)

    zero = FittedConstants(platform, 0, 0, 0, 0, 0, 0)
    base = parts(zero)
    per_copy = {name: parts(replace(zero, **{name: 1})) - base for name in COPY_CHOICES}
    best: tuple[float, FittedConstants] | None = None
    for copies in itertools.product(*COPY_CHOICES.values()):
        chosen = dict(zip(COPY_CHOICES, copies, strict=True))
        trial = base + sum(count * per_copy[name] for name, count in chosen.items())
        actor, actor_parts = _least_worst_base(trial[:, 0] / actors, measured_actors / actors)
        server, engine_parts = _least_worst_base(trial[:, 1], measured_engine)
        total = actor_parts * actors + engine_parts + trial[:, 2]
        score = float(np.abs(np.log(total / measured_total)).max())
        if best is None or score < best[0]:
            best = (score, FittedConstants(platform, actor, server, **chosen))
    assert best is not None
    return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="derive the fitted constants from the recorded runs")
    parser.add_argument("--leave-one-out", action="store_true", help="estimate each run from a fit without it")
    args = parser.parse_args()
    runs = recorded_runs()
    if args.leave_one_out:
        held_out = [run.estimate_gib(fit(runs[:i] + runs[i + 1 :])) / run.peak_gib for i, run in enumerate(runs)]
        for run, ratio in zip(runs, held_out, strict=True):
            print(f"{run.source}: {ratio:.2f}")
        print(f"estimate / measured, each run left out of the fit: {min(held_out):.2f} to {max(held_out):.2f}")
        return
    if args.fit:
        fitted = fit(runs)
        for name, value in vars(fitted).items():
            print(f"{name} = {value // MIB} * MIB" if name.endswith("_bytes") else f"{name} = {value}")
        ratios = [run.estimate_gib(fitted) / run.peak_gib for run in runs]
        print(f"estimate / measured over {len(runs)} runs: {min(ratios):.2f} to {max(ratios):.2f}")
        return
    print("| run | clients | estimate (GiB) | measured peak PSS (GiB) | estimate / measured |")
    print("|---|---|---|---|---|")
    for run in runs:
        estimate = run.estimate_gib()
        print(
            f"| {run.source} | {run.num_supernodes:,} | {estimate:.2f} | {run.peak_gib:.2f} "
            f"| {estimate / run.peak_gib:.2f} |"
        )


if __name__ == "__main__":
    main()
