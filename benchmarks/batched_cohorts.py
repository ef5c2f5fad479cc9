"""Batched cohorts against one client at a time, side by side: the local SGD of a round's cohort, and whole in-process
runs.

    python -m benchmarks.batched_cohorts [--device cpu|cuda] [--parts training in-process] [--pairs 3]
        [--jobs lenet5-10 lenet5-100 wrn16-10] [--dataset fashion-mnist] [--clients 100] [--per-round 10]
        [--model lenet5] [--rounds 10] [--out FILE]

- ``training``: one round of a cohort's local SGD, ``models.cohort_training.train_cohort`` against ``train_epochs``
  client after client, E = 1, batch 32, SGD with momentum 0.5 (the pfl job's). The clients' data are random tensors
  shaped like the jobs' (the time of an SGD step does not depend on pixel values): ``lenet5-10`` is the pfl job's
  round (Fashion-MNIST IID over 100 clients, 600 images each, 10 a round), ``lenet5-100`` 100 such clients in one
  round, ``wrn16-10`` WRN-16-1 on full Fashion-MNIST over 10 clients (6,000 images each). Each pair also reports the
  largest parameter difference between the two paths (float32).
- ``in-process``: whole runs of the pfl job's settings (``benchmarks/pfl_side_by_side.py``) through the in-process
  runner, with and without ``batched``, on ``--dataset`` with ``--clients`` clients, ``--per-round`` of them a round:
  the median round seconds over rounds 2 onwards, the whole run's seconds and the final accuracies (equal up to
  float rounding).

Pairs alternate (alone, then batched) and each figure is the median over pairs; the ratio is alone / batched. Writes
``measurements/benchmarks/batched_cohorts_<device>.json`` (or ``--out``) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR
from client_app.epoch_training import ThetaForward
from models import NO_FREEZE
from models.cohort_training import ClientJob, train_alone, train_cohort
from models.device import describe_available, make_cuda_deterministic, synchronize
from models.registry import build_model
from models.training import cross_entropy_of

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
    from benchmarks.pfl_side_by_side import JOB

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
    from experiments.in_process import run_cell_in_process
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


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Device: {result['device']}; threads {result['threads']}.", ""]
    if result.get("training"):
        lines += [
            "| job | clients × images | one at a time, s | batched, s | speed-up | largest |Δθ| |",
            "|---|---|---|---|---|---|",
        ]
        for row in result["training"]:
            lines.append(
                f"| {row['job']} | {row['clients']} × {row['images_per_client']} | {row['alone_median']:.2f} | "
                f"{row['batched_median']:.2f} | {row['speed_up']:.2f}× | {row['largest_parameter_difference']:.1e} |"
            )
    for row in result.get("in_process", []):
        lines += [
            "",
            f"In-process runs ({row['model']}, {row['dataset']}, {row['clients']} clients, {row['per_round']} a round, "
            f"{row['rounds']} rounds): median round {row['alone_round_median']} s one at a time, "
            f"{row['batched_round_median']} s batched (speed-up {row['round_speed_up']}); whole run "
            f"{row['alone_whole_median']} s and {row['batched_whole_median']} s; final accuracies "
            f"{[r['final_accuracy'] for r in row['runs']]}.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--parts", nargs="+", default=["training", "in-process"], choices=("training", "in-process"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--jobs", nargs="+", default=list(TRAINING_JOBS), choices=list(TRAINING_JOBS))
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--model", nargs="+", default=["lenet5"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        make_cuda_deterministic()  # as the app's runs on a GPU are
    result: dict[str, Any] = {"device": describe_available(), "threads": args.threads, "pairs": args.pairs}
    if "training" in args.parts:
        result["training"] = []
        for name in args.jobs:
            result["training"].append(measure_training(name, args.pairs, device))
            print(json.dumps(result["training"][-1]), flush=True)
    if "in-process" in args.parts:
        result["in_process"] = []
        for model in args.model:
            result["in_process"].append(measure_in_process(argparse.Namespace(**{**vars(args), "model": model})))
            print(json.dumps({k: v for k, v in result["in_process"][-1].items() if k != "runs"}), flush=True)
    out = args.out or RESULTS_DIR / f"batched_cohorts_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result))
    failed = [run for row in result.get("in_process", []) for run in row["runs"] if run["exit_code"]]
    for run in failed:
        print(f"a run failed (batched={run['batched']}): {run['log_tail']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
