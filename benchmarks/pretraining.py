"""How good and how stable is the server's pretrained model? Test accuracy over seeds and torch thread counts.

    python -m benchmarks.pretraining [--seeds 0 1 2] [--threads 1 2] [--run-config "key=value ..."]

For each (seed, threads) it pretrains from scratch (a fresh cache folder) with the app's recipe and settings (the
defaults plus ``--run-config``), then evaluates the kept weights on the test set. Reported: test accuracy, the
epoch kept and its validation accuracy, seconds, and the spread (max − min) of test accuracy over all runs. Each
run is a fresh process, so thread counts and caches do not leak between runs. Writes
``measurements/benchmarks/pretraining.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import RESULTS_DIR

RESULTS = RESULTS_DIR / "pretraining.json"


def measure(seed: int, threads: int, run_config: str, cache_dir: str) -> dict:
    """Pretrain once and evaluate (inside a fresh process)."""
    from data.federated import load_test_set
    from data.transforms import to_model_input
    from methods.registry import config_with_overrides
    from models.training import evaluate
    from run_config import build_model_for, federated_split
    from server_app.pretraining import initial_state, pretraining_report

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    config = config_with_overrides(f"{run_config} seed={seed} pretrain-cache-dir='{cache_dir}'")
    tick = time.perf_counter()
    state = initial_state(config)
    seconds = time.perf_counter() - tick
    model = build_model_for(config)
    model.load_state_dict(state)
    split = federated_split(config)
    test = load_test_set(split)
    loss, accuracy = evaluate(
        model.eval(), to_model_input(test.images, split.info), torch.from_numpy(test.labels), config.eval_batch_size
    )
    report = pretraining_report(config) or {}
    return {
        "seed": seed,
        "threads": threads,
        "test_accuracy": accuracy,
        "test_loss": loss,
        "seconds": seconds,
        "kept_epoch": report.get("kept_epoch"),
        "validation_accuracy": report.get("validation_accuracy"),
        "model": config.model,
        "dataset": config.dataset,
        "epochs": config.pretrain_epochs,
        "machine": report.get("machine"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--run-config", default="", help="overrides of the app's defaults, as for flwr run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # seed threads cache-dir: one run, this process
    args = parser.parse_args(argv)
    if args.one:
        seed, threads, cache_dir = args.one
        print(json.dumps(measure(int(seed), int(threads), args.run_config, cache_dir)))
        return 0
    runs = []
    for seed in args.seeds:
        for threads in args.threads:
            with tempfile.TemporaryDirectory() as cache_dir:
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.pretraining",
                        "--one",
                        str(seed),
                        str(threads),
                        cache_dir,
                        "--run-config",
                        args.run_config,
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), flush=True)
    accuracies = [r["test_accuracy"] for r in runs]
    report = {
        "run_config": args.run_config,
        "runs": runs,
        "min": min(accuracies),
        "max": max(accuracies),
        "spread": max(accuracies) - min(accuracies),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"test accuracy {100 * report['min']:.1f}–{100 * report['max']:.1f}% (spread "
        f"{100 * report['spread']:.1f} points) over {len(runs)} runs; written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
