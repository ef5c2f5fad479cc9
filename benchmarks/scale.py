"""Round time and peak memory against the population and the clients per round, for FedAvg and FedFT-EDS; and the
launcher's memory estimate against every recorded run.

    python -m benchmarks scale [--methods fedavg fedft-eds] [--model lenet5] [--rounds 3] [--only 100/1 ...]
    python -m benchmarks scale --table                    # the table of the recorded runs; runs nothing
    python -m benchmarks scale --estimate [--fit | --leave-one-out]   # the memory estimate; runs nothing
    python -m benchmarks scale --cross-device [--only 100000/100 ...]  # 1,000 to 100,000 clients, 100 a round

Whole simulations (``python -m simulation``: a private SuperLink, Ray, the ServerApp and the ClientApp actors), every
process's PSS (shared pages divided among the processes sharing them) summed every 0.5 s and the peak broken down by
process kind: populations 10, 100, 1,000 and 10,000 at 10 clients per round, and 1 and 100 clients per round at a
population of 100. The workload is small so that the grid fits a 2-core machine: full Fashion-MNIST split IID (48,000
training images over the population: a client's data shrinks as the population grows), LeNet-5 (``--model``: another)
from random weights (scale is about the system, not accuracy), one local epoch. Seconds per round come from
rounds.jsonl. Each run is written to ``measurements/benchmarks/scale.json`` as soon as it ends (with the load average
around it), and a Markdown table is printed at the end.

``--cross-device`` is the population curve of a cross-device study: 1,000, 10,000 and 100,000 clients at 100 a
round, 3 rounds of FedAvg (LeNet-5, from random weights, one local epoch, IID) with random and with FedEntOpt
selection, each through Flower's engine and with the in-process engine (``python -m simulation --in-process``: no
Ray, no SuperLink, one client after another). Full Fashion-MNIST cannot give 100,000 clients a sample each (48,000
client images; the app refuses an empty partition), so these runs use its training images three times (the image,
and copies shifted one pixel right and one down: 144,000 client images, 1.44 a client at 100,000), written once as a
saved Hugging Face dataset (``--dataset-dir``) and read as the user's own data. Beside each run: the round's seconds
outside client compute (the round's wall seconds less its clients' summed training seconds over the clients that
train at once: the actors, or one in-process) and, for the engine, the launcher's start-time memory estimate.

``--estimate`` reads the runs recorded on the code of the fourth performance pass (this grid's ``scale.json``, the
10-client runs of WRN-16-1 FedFT-EDS on full Fashion-MNIST, Dir(0.5), in ``scale10_memory.json`` at the pass's final
commit, and the default runs of ``default_run.json``), estimates each from its run config and population as the
launcher does (``simulation.memory_check``), and prints the estimate, the measured peak and their ratio; ``--fit``
derives the estimate's fitted constants (``simulation.memory_estimate.FITTED``) again from those runs,
``--leave-one-out`` estimates each run by a fit without it.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features
from datasets import Image as ImageFeature
from PIL import Image

from benchmarks import PROJECT_DIR, RESULTS_DIR, command_line
from benchmarks.measured_run import PeakMemory, pss_kib, simulation_kind
from data.loading import load_dataset
from methods.registry import config_with_overrides
from simulation.local_run import processes_marked
from simulation.memory_check import simulation_size
from simulation.memory_estimate import FITTED, MIB, FittedConstants, SimulationSize, actors_at_once, estimate_peak

NAME = "scale"
RESULTS = RESULTS_DIR / "scale.json"

MARKER = "FEDFT_SCALE_BENCHMARK"


def _is_actor(pid: int) -> bool:
    return simulation_kind(pid) == "client actor"


#: The first scale runs' workload (``scale10_memory.json``, memory-limit's ``scale10`` case): full Fashion-MNIST,
#: Dir(0.5), WRN-16-1 FedFT-EDS from random weights.
SCALE_WORKLOAD = "dataset='fashion-mnist' dirichlet-alpha=0.5 pretrain='none' method='fedft-eds'"


def measure(
    num_clients: int,
    per_round: int,
    rounds: int,
    cpus_per_client: int,
    results_dir: Path,
    log_dir: Path,
    workload: str = SCALE_WORKLOAD,
    name: str = "",
    in_process: bool = False,
) -> dict:
    """One simulation of ``workload`` (run-config text), through Flower's engine or ``in_process``; its peak memory
    (and what it is made of), actor count and per-round wall seconds (its log in ``log_dir``)."""
    name = name or f"scale-{num_clients}"
    overrides = (
        f"{workload} fraction-train={per_round / num_clients} num-server-rounds={rounds} "
        f"results-dir='{results_dir}' run-name='{name}' node-wait-seconds=900.0"
    )
    marker = uuid.uuid4().hex
    sampler = PeakMemory(
        lambda: processes_marked(marker, variable=MARKER), pss_kib, counted=_is_actor, kind=simulation_kind
    )
    load_before = os.getloadavg()
    sampler.start()
    tick = time.perf_counter()
    with (log_dir / f"{name}-{cpus_per_client}cpu.log").open("wb") as log:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "simulation",
                "--num-supernodes",
                str(num_clients),
                "--cpus-per-client",
                str(cpus_per_client),
                "--run-config",
                overrides,
                *(["--in-process"] if in_process else []),
            ],
            cwd=PROJECT_DIR,
            env={**os.environ, MARKER: marker},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    total = time.perf_counter() - tick
    sampler.stop()
    rounds_file = results_dir / name / "rounds.jsonl"
    records = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    later = [r["wall_seconds"] for r in records[1:]]
    parallel = 1 if in_process else max(1, min(sampler.peak_counted, per_round))
    return {
        "engine": "in-process" if in_process else "flower",
        "round_overhead_seconds": [round(overhead(r, parallel), 3) for r in records],
        "clients": num_clients,
        "clients_per_round": per_round,
        "cpus_per_client": cpus_per_client,
        "exit_code": code,
        "peak_memory_gib": sampler.peak_total_kib / 2**20,
        "peak_by_kind_mib": {kind: round(kib / 1024, 1) for kind, kib in sampler.peak_by_kind_kib.items()},
        "peak_actors": sampler.peak_counted,
        "peak_processes": sampler.peak_processes,
        "round_1_seconds": records[0]["wall_seconds"] if records else None,
        "later_round_seconds_median": statistics.median(later) if later else None,
        "total_seconds": total,
        "final_accuracy": records[-1]["accuracy"] if records else None,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def overhead(record: dict, parallel: int) -> float:
    """A round's seconds outside client compute: its wall seconds less its clients' summed training seconds shared
    over the ``parallel`` clients that train at once."""
    trained = sum(stats["train_seconds"] for stats in record.get("client_stats", []))
    return float(record["wall_seconds"] - trained / parallel)


#: (population, clients per round): the population curve at 10 per round, then the cohort curve at 100.
GRID = ((10, 10), (100, 10), (1000, 10), (10000, 10), (100, 1), (100, 100))
WORKLOAD = "dataset='fashion-mnist' partitioner='iid' pretrain='none' local-epochs=1"


def workload(method: str, model: str) -> str:
    """The run-config text of one method's runs."""
    return f"{WORKLOAD} model='{model}' method='{method}'"


def _cell(run: dict) -> tuple:
    return (
        run["method"], run.get("model", "lenet5"), run["clients"], run["clients_per_round"],
        run.get("engine", "flower"), run.get("selection", "random"), run.get("grid", "scale"),
    )  # fmt: skip


#: The cross-device curve: populations at 100 clients a round.
CROSS_DEVICE_GRID = ((1000, 100), (10000, 100), (100000, 100))
CROSS_DEVICE_SELECTIONS = ("random", "fedentopt")
CROSS_DEVICE_WORKLOAD = "partitioner='iid' pretrain='none' local-epochs=1 model='lenet5' method='fedavg'"
#: Fashion-MNIST's training images three times: how many clients it can give a sample each (public 20% held out).
TRIPLED = "fashion-mnist-x3"


def tripled_fashion_mnist(folder: Path) -> Path:
    """``folder/fashion-mnist-x3``: Fashion-MNIST's training set three times (each image, and copies shifted one pixel
    right and one pixel down) and its test set, saved as a Hugging Face dataset; written once."""
    target = folder / TRIPLED
    if (target / "dataset_dict.json").is_file():
        return target
    splits = load_dataset("fashion-mnist")
    train = splits.train.images
    images = np.concatenate([train, np.roll(train, 1, axis=3), np.roll(train, 1, axis=2)])
    labels = np.concatenate([splits.train.labels] * 3)

    def png(image: np.ndarray) -> dict:
        buffer = io.BytesIO()
        Image.fromarray(image[0]).save(buffer, format="PNG")
        return {"bytes": buffer.getvalue(), "path": None}

    features = Features({"image": ImageFeature(), "label": ClassLabel(names=[str(c) for c in range(10)])})

    def dataset(images: np.ndarray, labels: np.ndarray) -> Dataset:
        return Dataset.from_dict({"image": [png(i) for i in images], "label": labels.tolist()}, features=features)

    saved = DatasetDict({"train": dataset(images, labels), "test": dataset(splits.test.images, splits.test.labels)})
    saved.save_to_disk(str(target))
    return target


def engine_estimate_gib(text: str, population: int, actors: int) -> float:
    """The launcher's start-time estimate of a run through Flower's engine (``simulation.memory_check``)."""
    size = simulation_size(config_with_overrides(text), population, actors)
    return estimate_peak(size).total / GIB


def cross_device(args: argparse.Namespace) -> list[dict]:
    """Every cell of the cross-device curve (``--only`` picks), each written to ``args.out`` as it ends."""
    dataset = tripled_fashion_mnist(args.dataset_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cells = [cell for cell in CROSS_DEVICE_GRID if not args.only or f"{cell[0]}/{cell[1]}" in args.only]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for population, per_round in cells:
            for selection in CROSS_DEVICE_SELECTIONS:
                for in_process in [engine == "in-process" for engine in args.engines]:
                    text = f"{CROSS_DEVICE_WORKLOAD} dataset='{dataset}' client-selection='{selection}'"
                    engine = "in-process" if in_process else "flower"
                    name = f"cross-device-{selection}-{population}-{engine}"
                    result = measure(population, per_round, 3, 1, Path(tmp), args.out.parent, text, name, in_process)
                    run = {"grid": "cross-device", "method": "fedavg", "model": "lenet5", "selection": selection,
                           "dataset": TRIPLED, "rounds": 3, **result}  # fmt: skip
                    if not in_process:
                        actors = max(actors_at_once(os.cpu_count() or 1, 1, 0, 0.0), 1)  # as the launcher counts
                        run["estimate_gib"] = engine_estimate_gib(
                            f"{text} fraction-train={per_round / population}", population, actors
                        )
                    runs.append(run)
                    _record(args.out, runs)
    return runs


def _record(out: Path, runs: list[dict]) -> None:
    """``runs`` written into ``out``, replacing the recorded runs of the same cells."""
    previous = json.loads(out.read_text())["runs"] if out.exists() else []
    done = {_cell(r) for r in runs}
    kept = [r for r in previous if _cell(r) not in done]
    out.write_text(json.dumps({"cpus": os.cpu_count(), "runs": kept + runs}, indent=1) + "\n")


#: Training images the clients share (full Fashion-MNIST less the server's public 20%).
CLIENT_IMAGES = 48_000


def _images(count: float) -> str:
    return f"{count:,.0f}" if count >= 10 else f"{count:.1f}"


def table(runs: list[dict]) -> str:
    """The runs as a Markdown table, with what the peak is made of: the simulation engine's process (the ServerApp,
    Ray's driver, every SuperNode's context) and the ClientApp actors."""
    lines = [
        "| method | model | clients | per round | images per client | round 1 (s) | later rounds, median (s) "
        "| whole run (s) | peak PSS (GiB) | of it: engine + ServerApp, actors (GiB) | load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cell = (
            f"| {r['method']} | {r.get('model', 'lenet5')} | {r['clients']:,} | {r['clients_per_round']} "
            f"| {_images(CLIENT_IMAGES / r['clients'])} "
        )
        if r["exit_code"] != 0 or r["round_1_seconds"] is None:
            lines.append(f"{cell}| failed: exit code {r['exit_code']} |")
            continue
        parts = r["peak_by_kind_mib"]
        lines.append(
            f"{cell}| {r['round_1_seconds']:.1f} | {r['later_round_seconds_median']:.1f} | {r['total_seconds']:.0f} "
            f"| {r['peak_memory_gib']:.2f} "
            f"| {parts.get('simulation engine', 0) / 1024:.2f}, {parts.get('client actor', 0) / 1024:.2f} "
            f"| {r['load_average_before'][0]:.1f} → {r['load_average_after'][0]:.1f} |"
        )
    return "\n".join(lines)


def cross_device_table(runs: list[dict]) -> str:
    """The cross-device runs as a Markdown table: per population, selection and engine, the peak and what a round
    costs outside client compute, and the engine's estimate beside its peak."""
    lines = [
        "| clients | selection | engine | images per client | whole run (s) | round overhead, rounds 1-3 (s) "
        "| peak PSS (GiB) | of it: engine + ServerApp, SuperLink, actors (GiB) | estimate (GiB) | estimate / peak "
        "| load average (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        cell = (
            f"| {r['clients']:,} | {r['selection']} | {r['engine']} | {_images(TRIPLED_CLIENT_IMAGES / r['clients'])} "
        )
        if r["exit_code"] != 0 or not r["round_overhead_seconds"]:
            lines.append(f"{cell}| failed: exit code {r['exit_code']}{'' if r['exit_code'] else ', no round'} |")
            continue
        estimate = r.get("estimate_gib")
        beside = f"{estimate:.2f} | {estimate / r['peak_memory_gib']:.2f}" if estimate else "– | –"
        lines.append(
            f"{cell}| {r['total_seconds']:.0f} | {', '.join(f'{s:.1f}' for s in r['round_overhead_seconds'])} "
            f"| {r['peak_memory_gib']:.2f} | {_parts(r)} | {beside} "
            f"| {r['load_average_before'][0]:.1f} → {r['load_average_after'][0]:.1f} |"
        )
    return "\n".join(lines)


def _parts(run: dict) -> str:
    """What a run's peak is made of: the process holding the ServerApp (Flower's engine, or the in-process run), the
    SuperLink and the ClientApp actors (GiB; – where the engine has none)."""
    parts = run["peak_by_kind_mib"]
    if run.get("engine") == "in-process":
        return f"{parts.get('launcher', 0) / 1024:.2f}, –, –"
    return (
        f"{parts.get('simulation engine', 0) / 1024:.2f}, {parts.get('SuperLink', 0) / 1024:.2f}, "
        f"{parts.get('client actor', 0) / 1024:.2f}"
    )


#: Client images of the tripled set (three times full Fashion-MNIST's 48,000).
TRIPLED_CLIENT_IMAGES = 3 * 48_000
GIB = 2**30
#: Ray ClientApp actors of the recorded runs that do not say: one per CPU of the 2-core machine.
ACTORS = 2
#: The commit whose 10-client scale runs in ``scale10_memory.json`` are the current code's (the fourth pass's last
#: change to what a simulation holds: the feature cache's mapped files).
FOURTH_PASS_COMMIT = "9e0ccf5"


@dataclass(frozen=True)
class RecordedRun:
    """A measured simulation: where it is recorded, its run config text, population, peak PSS and what the peak
    was made of (MiB per process kind, ``benchmarks.measured_run.SIMULATION_KINDS``)."""

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
            f"grid {r['method']} {r.get('model', 'lenet5')} {r['clients']}/{r['clients_per_round']}",
            f"{r['workload']} fraction-train={r['clients_per_round'] / r['clients']} num-server-rounds={r['rounds']}",
            r["clients"],
            r["peak_actors"],
            r["peak_memory_gib"],
            r["peak_by_kind_mib"],
        )
        for r in _read("scale.json")["runs"]
        if r["exit_code"] == 0 and r.get("grid", "scale") == "scale"
    ]
    runs += [
        RecordedRun(
            f"WRN-16-1 {r['clients']}/{r['clients_per_round']} ({r['file']})",
            f"{SCALE_WORKLOAD} fraction-train={r['clients_per_round'] / r['clients']} num-server-rounds=3",
            r["clients"],
            r["peak_actors"],
            r["peak_memory_gib"],
            r["peak_by_kind_mib"],
        )
        for r in _read("scale10_memory.json")["runs"]
        if r["commit"] == FOURTH_PASS_COMMIT and not r["environment"] and r["exit_code"] == 0
    ]
    default = _read("default_run.json")
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


def estimate_report(runs: list[RecordedRun], *, fit_again: bool = False, leave_one_out: bool = False) -> str:
    """The estimate against each run as a Markdown table; or the constants fitted again (``fit_again``), or each run
    estimated by a fit without it (``leave_one_out``), with the range of the ratios."""
    if leave_one_out:
        held_out = [run.estimate_gib(fit(runs[:i] + runs[i + 1 :])) / run.peak_gib for i, run in enumerate(runs)]
        lines = [f"{run.source}: {ratio:.2f}" for run, ratio in zip(runs, held_out, strict=True)]
        lines.append(f"estimate / measured, each run left out of the fit: {min(held_out):.2f} to {max(held_out):.2f}")
        return "\n".join(lines)
    if fit_again:
        fitted = fit(runs)
        lines = [
            f"{name} = {value // MIB} * MIB" if name.endswith("_bytes") else f"{name} = {value}"
            for name, value in vars(fitted).items()
        ]
        ratios = [run.estimate_gib(fitted) / run.peak_gib for run in runs]
        lines.append(f"estimate / measured over {len(runs)} runs: {min(ratios):.2f} to {max(ratios):.2f}")
        return "\n".join(lines)
    lines = [
        "| run | clients | estimate (GiB) | measured peak PSS (GiB) | estimate / measured |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        estimate = run.estimate_gib()
        lines.append(
            f"| {run.source} | {run.num_supernodes:,} | {estimate:.2f} | {run.peak_gib:.2f} "
            f"| {estimate / run.peak_gib:.2f} |"
        )
    return "\n".join(lines)


def recorded_figure() -> str:
    runs = json.loads(RESULTS.read_text())["runs"]
    grid = [r for r in runs if r.get("grid", "scale") == "scale"]
    crossed = [r for r in runs if r.get("grid") == "cross-device"]
    if not crossed:
        return table(grid)
    return f"{table(grid)}\n\nThe cross-device curve (`--cross-device`):\n\n{cross_device_table(crossed)}"


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--methods", nargs="+", default=["fedavg", "fedft-eds"])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="only these cells, as population/per-round, e.g. 100/1")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true", help="print the table of the recorded runs; run nothing")
    parser.add_argument("--estimate", action="store_true", help="the memory estimate against the recorded runs")
    parser.add_argument("--fit", action="store_true", help="with --estimate: derive the fitted constants again")
    parser.add_argument("--leave-one-out", action="store_true", help="with --estimate: each run by a fit without it")
    parser.add_argument("--cross-device", action="store_true", help="the cross-device curve (1,000 to 100,000 clients)")
    parser.add_argument(
        "--engines", nargs="+", choices=["flower", "in-process"], default=["flower", "in-process"],
        help="with --cross-device: the engines to run each cell with",
    )  # fmt: skip
    parser.add_argument(
        "--dataset-dir", type=Path, default=Path.home() / ".cache" / "fedft", help="where --cross-device's data goes"
    )
    args = parser.parse_args(argv)
    if args.cross_device:
        crossed = cross_device(args)
        print(cross_device_table(crossed))
        return 1 if any(r["exit_code"] for r in crossed) else 0
    if args.fit or args.leave_one_out:
        args.estimate = True
    if args.estimate:
        print(estimate_report(recorded_runs(), fit_again=args.fit, leave_one_out=args.leave_one_out))
        return 0
    if args.table:
        print(table(json.loads(args.out.read_text())["runs"]))
        return 0
    cells = [cell for cell in GRID if not args.only or f"{cell[0]}/{cell[1]}" in args.only]
    previous = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    runs: list[dict] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for population, per_round in cells:
            for method in args.methods:
                name = f"cost-{method}-{args.model}-{population}-{per_round}"
                text = workload(method, args.model)
                result = measure(population, per_round, args.rounds, 1, Path(tmp), args.out.parent, text, name)
                runs.append({"method": method, "model": args.model, "rounds": args.rounds, "workload": text, **result})
                done = {_cell(r) for r in runs}
                kept = [r for r in previous if _cell(r) not in done]
                args.out.write_text(json.dumps({"cpus": os.cpu_count(), "runs": kept + runs}, indent=1) + "\n")
    print(table(runs))
    return 1 if any(r["exit_code"] for r in runs) else 0
