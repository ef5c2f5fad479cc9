"""A round on one GPU, measured two ways: ten clients sharing the GPU in Flower's simulation, and the in-process
engine's batched cohorts (a round's clients trained as one computation) against one client at a time.

    python -m benchmarks gpu-round [--parts simulation cohort-training cohort-runs] [--device cuda] [--pairs 3]
        [--methods fedavg fedft-eds] [--gpus-per-client 0.1] [--sim-rounds 4]
        [--jobs lenet5-10 lenet5-100 wrn16-10] [--dataset fashion-mnist] [--clients 100] [--per-round 10]
        [--model lenet5] [--rounds 10] [--out FILE]

- ``simulation`` (needs a CUDA GPU and Ray): per method one ``python -m simulation`` run, WRN-16-1 on full
  Fashion-MNIST, Dir(0.1), 10 clients all taking part, E = 5, pretrained on the server's public split on the GPU
  (``server-device = cuda``), clients on ``device = cuda`` with ``client-resources-num-gpus`` = ``--gpus-per-client``
  (0.1 lets ten ClientApps train at once on one GPU). Reported per method, over rounds 2 onwards (round 1 includes
  start-up and, for FedFT-EDS, the feature cache): the median wall seconds of a round, the median of the round's
  summed client training seconds, and the median of its slowest client's. Targets on an H100: FedAvg ≤ 5 s wall per
  round; FedFT-EDS ≤ 1 s of client compute per round. Writes ``measurements/benchmarks/gpu_round.json``.
- ``cohort-training`` (torch alone: runs where flwr does not import; ``--device cpu`` too): one round of a cohort's
  local SGD, ``models.cohort_training.train_cohort`` against ``train_epochs`` client after client, E = 1, batch 32,
  SGD with momentum 0.5 (the pfl job's). The clients' data are random tensors shaped like the jobs' (the time of an
  SGD step does not depend on pixel values): ``lenet5-10`` is the pfl job's round (Fashion-MNIST IID over 100
  clients, 600 images each, 10 a round), ``lenet5-100`` 100 such clients in one round, ``wrn16-10`` WRN-16-1 on full
  Fashion-MNIST over 10 clients (6,000 images each). Each pair also reports the largest parameter difference
  between the two paths (float32).
- ``cohort-runs``: whole runs of the pfl job's settings (``benchmarks/pfl_side_by_side.py``) through the in-process
  engine, with and without ``batched``, on ``--dataset`` with ``--clients`` clients, ``--per-round`` of them a
  round: the median round seconds over rounds 2 onwards, the whole run's seconds and the final accuracies (equal up
  to float rounding).

The cohort parts' pairs alternate (alone, then batched) and each figure is the median over pairs; the ratio is alone
/ batched. They write ``measurements/benchmarks/batched_cohorts_<device>.json`` (or ``--out``). Each part prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks import PROJECT_DIR, RESULTS_DIR, command_line
from client_app.epoch_training import ThetaForward
from models import NO_FREEZE
from models.cohort_training import ClientJob, train_alone, train_cohort
from models.device import describe_available, make_cuda_deterministic, synchronize
from models.registry import build_model
from models.training import cross_entropy_of

NAME = "gpu-round"
PARTS = ("simulation", "cohort-training", "cohort-runs")
SIMULATION_RESULTS = RESULTS_DIR / "gpu_round.json"


def cohort_results(device: str) -> Path:
    """Where the cohort parts write on ``device`` (its type: cpu, cuda)."""
    return RESULTS_DIR / f"batched_cohorts_{torch.device(device).type}.json"


# Ten clients sharing one GPU in Flower's simulation.


def round_figures(records: list[dict]) -> dict:
    """Medians over rounds 2 onwards of a run's rounds.jsonl records."""
    later = records[1:] or records
    return {
        "rounds": len(records),
        "round_1_seconds": records[0]["wall_seconds"] if records else None,
        "wall_seconds_median": statistics.median(r["wall_seconds"] for r in later) if later else None,
        "client_seconds_sum_median": statistics.median(r["client_train_seconds"] for r in later) if later else None,
        "slowest_client_seconds_median": statistics.median(
            max((s["train_seconds"] for s in r["client_stats"]), default=0.0) for r in later
        )
        if later
        else None,
        "best_accuracy": max((r["accuracy"] for r in records), default=None),
    }


def measure(method: str, rounds: int, gpus_per_client: float, results_dir: Path, log: Path) -> dict:
    overrides = (
        f"method='{method}' dataset='fashion-mnist' model='wrn-16-1' dirichlet-alpha=0.1 local-epochs=5 "
        f"num-server-rounds={rounds} device='cuda' server-device='cuda' results-dir='{results_dir}' "
        f"run-name='{method}'"
    )
    with log.open("wb") as handle:
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "simulation",
                "--num-supernodes",
                "10",
                "--gpus-per-client",
                str(gpus_per_client),
                "--run-config",
                overrides,
            ],
            cwd=PROJECT_DIR,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    rounds_file = results_dir / method / "rounds.jsonl"
    records = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    return {"method": method, "exit_code": code, **round_figures(records)}


def simulation_table(report: dict[str, Any]) -> str:
    """The simulation part's runs as a Markdown table."""
    lines = [
        f"{report['device']}; {report['gpus_per_client']} GPU per client; medians of rounds 2 onwards",
        "",
        "| method | wall s/round | client s/round (sum) | slowest client s | round 1 s | best acc. |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        if r["exit_code"] != 0 or not r["rounds"]:
            lines.append(f"| {r['method']} | failed (exit code {r['exit_code']}) |")
            continue
        lines.append(
            f"| {r['method']} | {r['wall_seconds_median']:.2f} | {r['client_seconds_sum_median']:.2f} | "
            f"{r['slowest_client_seconds_median']:.2f} | {r['round_1_seconds']:.1f} | {r['best_accuracy']:.4f} |"
        )
    return "\n".join(lines)


def measure_simulation(args: argparse.Namespace) -> dict[str, Any]:
    """Each method's run on the GPU (the ``simulation`` part); the runs' logs stay in a folder of their own."""
    logs = Path(tempfile.mkdtemp(prefix="fedft-gpu-round-"))
    with tempfile.TemporaryDirectory() as tmp:
        runs = [measure(m, args.sim_rounds, args.gpus_per_client, Path(tmp), logs / f"{m}.log") for m in args.methods]
    print(f"the runs' logs: {logs}")
    return {"device": describe_available(), "gpus_per_client": args.gpus_per_client, "runs": runs}


# Batched cohorts against one client at a time.

#: name -> (model, clients in the round, images per client)
TRAINING_JOBS = {
    "lenet5-10": ("lenet5", 10, 600),
    "lenet5-100": ("lenet5", 100, 600),
    "wrn16-10": ("wrn-16-1", 10, 6000),
}
LEARNING_RATE, MOMENTUM, WEIGHT_DECAY, BATCH_SIZE = 0.1, 0.5, 1e-5, 32


def cohort(model_name: str, clients: int, images: int, device: torch.device) -> list[ClientJob]:
    """``clients`` jobs on copies of one fresh model, each over its own random 1x32x32 images."""
    torch.manual_seed(0)
    base = build_model(model_name, 1, 10, dropout=0.0).to(device)
    jobs = []
    for client in range(clients):
        model = copy.deepcopy(base)
        model.set_frozen(NO_FREEZE)
        theta = ThetaForward(model, NO_FREEZE, lambda x: x)
        jobs.append(
            ClientJob(
                theta,
                dict(theta.named_parameters()),
                torch.randn(images, 1, 32, 32, device=device),
                torch.randint(0, 10, (images,), device=device),
                epochs=1,
                batch_size=BATCH_SIZE,
                lr=LEARNING_RATE,
                momentum=MOMENTUM,
                weight_decay=WEIGHT_DECAY,
                generator=torch.Generator().manual_seed(client),
                client=client,
            )
        )
    return jobs


def train_one_at_a_time(jobs: list[ClientJob]) -> None:
    for job in jobs:
        train_alone(job, cross_entropy_of(job.module))


def timed(work: Callable[[], object], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    work()
    synchronize(device)
    return time.perf_counter() - start


def measure_training(name: str, pairs: int, device: torch.device) -> dict[str, Any]:
    """Seconds of one round's local SGD for job ``name``, one at a time and batched, over alternating pairs."""
    model_name, clients, images = TRAINING_JOBS[name]
    warm_up = cohort(model_name, 2, 2 * BATCH_SIZE, device)
    train_cohort(warm_up)  # the first vmap of a process imports torch's compiler stack (seconds, once)
    train_one_at_a_time(cohort(model_name, 2, 2 * BATCH_SIZE, device))
    alone_seconds, batched_seconds, differences = [], [], []
    for _ in range(pairs):
        alone, together = cohort(model_name, clients, images, device), cohort(model_name, clients, images, device)
        alone_seconds.append(timed(functools.partial(train_one_at_a_time, alone), device))
        batched_seconds.append(timed(functools.partial(train_cohort, together), device))
        differences.append(
            max(
                float((a.detach() - b.detach()).abs().max())
                for job_a, job_b in zip(alone, together, strict=True)
                for a, b in zip(job_a.params.values(), job_b.params.values(), strict=True)
            )
        )
        del alone, together
    alone_median, batched_median = statistics.median(alone_seconds), statistics.median(batched_seconds)
    return {
        "job": name,
        "model": model_name,
        "clients": clients,
        "images_per_client": images,
        "alone_seconds": alone_seconds,
        "batched_seconds": batched_seconds,
        "alone_median": alone_median,
        "batched_median": batched_median,
        "speed_up": alone_median / batched_median,
        "largest_parameter_difference": max(differences),
    }


def in_process_config(args: argparse.Namespace, results_dir: Path, run_name: str) -> dict[str, object]:
    from benchmarks.pfl_side_by_side import JOB  # flwr: imported only by this part (see cohort-training)

    return {
        **JOB,
        "dataset": args.dataset,
        "model": args.model,
        "num-server-rounds": args.rounds,
        "fraction-train": args.per_round / args.clients,
        "device": args.device,
        "server-device": args.device,
        "results-dir": str(results_dir),
        "run-name": run_name,
    }


def in_process_run(args: argparse.Namespace, results_dir: Path, run_name: str, batched: bool) -> dict[str, Any]:
    """One whole in-process run; its round seconds, whole seconds and final accuracy."""
    from simulation.in_process import run_cell_in_process  # flwr: imported only by this part (see cohort-training)
    from simulation.local_run import Resources

    config = in_process_config(args, results_dir, run_name)
    start = time.perf_counter()
    code = run_cell_in_process(config, args.clients, Resources(), results_dir / f"{run_name}.log", batched=batched)
    whole = time.perf_counter() - start
    rounds_file = results_dir / run_name / "rounds.jsonl"
    rounds = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
    later = [r["wall_seconds"] for r in rounds[1:]] or [r["wall_seconds"] for r in rounds]
    return {
        "batched": batched,
        "exit_code": code,
        "whole_seconds": whole,
        "round_seconds_median": statistics.median(later) if later else None,
        "client_train_seconds_median": statistics.median(r["client_train_seconds"] for r in rounds) if rounds else None,
        "final_accuracy": rounds[-1]["accuracy"] if rounds else None,
        "log_tail": (results_dir / f"{run_name}.log").read_text()[-600:] if code else "",
    }


def measure_in_process(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for pair in range(args.pairs):
            for batched in (False, True):
                runs.append(
                    in_process_run(args, Path(folder), f"pair{pair}-{'batched' if batched else 'alone'}", batched)
                )
                runs[-1]["load"] = [round(x, 2) for x in os.getloadavg()]

    def median_of(batched: bool, key: str) -> float | None:
        values = [r[key] for r in runs if r["batched"] is batched and r[key] is not None]
        return statistics.median(values) if values else None

    alone_round, batched_round = median_of(False, "round_seconds_median"), median_of(True, "round_seconds_median")
    return {
        "dataset": args.dataset,
        "model": args.model,
        "clients": args.clients,
        "per_round": args.per_round,
        "rounds": args.rounds,
        "runs": runs,
        "alone_round_median": alone_round,
        "batched_round_median": batched_round,
        "round_speed_up": alone_round / batched_round if alone_round and batched_round else None,
        "alone_whole_median": median_of(False, "whole_seconds"),
        "batched_whole_median": median_of(True, "whole_seconds"),
    }


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def cohort_table(result: dict[str, Any]) -> str:
    lines = [f"Device: {result['device']}; threads {result['threads']}.", ""]
    if result.get("training"):
        lines += [
            "| job | clients × images | one at a time, s | batched, s | speed-up | largest \\|Δθ\\| |",
            "|---|---|---|---|---|---|",
        ]
        for row in result["training"]:
            lines.append(
                f"| {row['job']} | {row['clients']} × {row['images_per_client']} | {row['alone_median']:.2f} | "
                f"{row['batched_median']:.2f} | {row['speed_up']:.2f}× | {row['largest_parameter_difference']:.1e} |"
            )
    for row in result.get("in_process", []):
        finals = ", ".join(f"{100 * r['final_accuracy']:.2f}%" for r in row["runs"] if r["final_accuracy"] is not None)
        lines += [
            "",
            f"In-process runs ({row['model']}, {row['dataset']}, {row['clients']} clients, {row['per_round']} a round, "
            f"{row['rounds']} rounds, {len(row['runs'])} runs): median round {_seconds(row['alone_round_median'])} "
            f"one at a time, {_seconds(row['batched_round_median'])} batched (speed-up "
            f"{_ratio(row['round_speed_up'])}); whole run {_seconds(row['alone_whole_median'])} and "
            f"{_seconds(row['batched_whole_median'])}; final accuracies (one at a time, batched, pair by pair) "
            f"{finals}.",
        ]
    return "\n".join(lines)


def recorded_figure() -> str:
    parts = []
    for device in ("cuda", "cpu"):
        path = cohort_results(device)
        if path.exists():
            parts.append(f"`{path.name}`: " + cohort_table(json.loads(path.read_text())))
    runs = cohort_results("cuda").with_name("batched_cohorts_cuda_runs.json")
    if runs.exists():
        parts.append(f"`{runs.name}`: " + cohort_table(json.loads(runs.read_text())))
    if SIMULATION_RESULTS.exists():
        parts.append(simulation_table(json.loads(SIMULATION_RESULTS.read_text())))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--parts", nargs="+", default=["cohort-training", "cohort-runs"], choices=PARTS)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--methods", nargs="+", default=["fedavg", "fedft-eds"], help="simulation: the methods")
    parser.add_argument("--sim-rounds", type=int, default=4, help="simulation: rounds of each run")
    parser.add_argument("--gpus-per-client", type=float, default=0.1, help="simulation: GPU share of a ClientApp")
    parser.add_argument("--pairs", type=int, default=3, help="cohort parts: alternating pairs")
    parser.add_argument("--jobs", nargs="+", default=list(TRAINING_JOBS), choices=list(TRAINING_JOBS))
    parser.add_argument("--dataset", default="fashion-mnist", help="cohort-runs: the runs' dataset")
    parser.add_argument("--clients", type=int, default=100, help="cohort-runs: population")
    parser.add_argument("--per-round", type=int, default=10, help="cohort-runs: clients a round")
    parser.add_argument("--model", nargs="+", default=["lenet5"], help="cohort-runs: one pair of runs per model")
    parser.add_argument("--rounds", type=int, default=10, help="cohort-runs: rounds of each run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="cohort parts: default batched_cohorts_<device>.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    failed = False
    if "simulation" in args.parts:
        if not torch.cuda.is_available():
            print(f"no CUDA GPU here ({describe_available()}); the simulation part needs one", file=sys.stderr)
            return 2
        report = measure_simulation(args)
        SIMULATION_RESULTS.parent.mkdir(parents=True, exist_ok=True)
        SIMULATION_RESULTS.write_text(json.dumps(report, indent=1) + "\n")
        print(simulation_table(report))
        failed = any(r["exit_code"] for r in report["runs"])
    if device.type == "cuda":
        make_cuda_deterministic()  # as the app's runs on a GPU are
    result: dict[str, Any] = {"device": describe_available(), "threads": args.threads, "pairs": args.pairs}
    if "cohort-training" in args.parts:
        result["training"] = []
        for name in args.jobs:
            result["training"].append(measure_training(name, args.pairs, device))
            print(json.dumps(result["training"][-1]), flush=True)
    if "cohort-runs" in args.parts:
        result["in_process"] = []
        for model in args.model:
            result["in_process"].append(measure_in_process(argparse.Namespace(**{**vars(args), "model": model})))
            print(json.dumps({k: v for k, v in result["in_process"][-1].items() if k != "runs"}), flush=True)
    if "training" in result or "in_process" in result:
        out = args.out or cohort_results(args.device)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(cohort_table(result))
        runs = [run for row in result.get("in_process", []) for run in row["runs"] if run["exit_code"]]
        for run in runs:
            print(f"a run failed (batched={run['batched']}): {run['log_tail']}")
        failed = failed or bool(runs)
    return 1 if failed else 0
