"""Does the default run improve on its pretrained start, and which setting decides? One change at a time.

    python -m benchmarks.default_variants [--variants default lr0.01 ...] [--work-dir DIR]

Each variant is the default configuration (``make run``: FedFT-EDS, WRN-16-1, fashion-mnist-mini, 10 Dir(0.1)
clients, 10 rounds, seed 0) with one setting changed, run by the real ServerApp and ClientApps in one process
(``tests/in_process.py``, no Ray; a run is deterministic for its configuration, so it scores what ``make run``
scores). All variants start from the same cached pretrained weights. For each run's final model the test
accuracy is also taken after re-estimating its BatchNorm running statistics on the server's public split: the
gap says how much of a loss comes from BatchNorm statistics averaged over non-IID clients rather than from the
weights. A variant whose run folder in ``--work-dir`` already holds a finished summary is read, not re-run.
Writes ``measurements/benchmarks/default_variants.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "lr0.01": {"learning-rate": 0.01},
    "alpha0.5": {"dirichlet-alpha": 0.5},
    "mean": {"aggregation": "mean"},
    "rds": {"method": "fedft-rds"},
    "all-data": {"method": "fedft-all"},
    "classifier-only": {"freeze": "up"},
}


def run_variant(work: Path, name: str) -> dict[str, Any]:
    """Run (or read) one variant; its accuracies per round and summary figures."""
    from run_config.defaults import load_defaults
    from tests.in_process import run_in_process

    directory = work / "results" / name
    seconds = None
    if not (directory / "summary.json").exists():
        config = load_defaults()
        config.update(
            {
                "results-dir": str(work / "results"),
                "run-name": name,
                "node-wait-seconds": 0.0,
                "feature-cache-dir": str(work / "features" / name),
                "client-threads": 1,
                **VARIANTS[name],
            }
        )
        tick = time.perf_counter()
        run_in_process(config, num_partitions=10)
        seconds = time.perf_counter() - tick
    summary = json.loads((directory / "summary.json").read_text())
    rounds = [json.loads(line)["accuracy"] for line in (directory / "rounds.jsonl").read_text().splitlines()]
    return {
        "variant": name,
        "changed": VARIANTS[name],
        "status": summary["status"],
        "initial_accuracy": summary["initial_accuracy"],
        "best_accuracy": summary["best_accuracy"],
        "best_round": summary["best_round"],
        "final_accuracy": summary["final_accuracy"],
        "client_seconds": summary["total_client_train_seconds"],
        "wall_seconds": seconds,
        "accuracy_per_round": [round(a, 4) for a in rounds],
        "final_with_batchnorm_reestimated": batchnorm_reestimated_accuracy(directory / "model.pt"),
    }


def batchnorm_reestimated_accuracy(model_file: Path) -> float:
    """Test accuracy of a run's final model after its BatchNorm statistics are recomputed on the public split."""
    from data.federated import load_public_split, load_test_set
    from data.transforms import to_model_input
    from methods.registry import config_with_overrides
    from models.batchnorm import settle_batchnorm
    from models.training import evaluate
    from run_config import build_model_for, federated_split

    config = config_with_overrides("")
    split = federated_split(config)
    test, public = load_test_set(split), load_public_split(split)
    model = build_model_for(config)
    model.load_state_dict(torch.load(model_file))
    settle_batchnorm(model, to_model_input(public.images, split.info), batch_size=config.eval_batch_size)
    _, accuracy = evaluate(
        model.eval(), to_model_input(test.images, split.info), torch.from_numpy(test.labels), config.eval_batch_size
    )
    return accuracy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--work-dir", type=Path, help="where the runs go (default: a new temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "default_variants.json")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fedft-default-variants-"))
    torch.set_num_threads(1)
    runs = []
    for name in args.variants:
        runs.append(run_variant(work, name))
        row = runs[-1]
        print(
            f"{name}: initial {100 * row['initial_accuracy']:.1f}%, best {100 * row['best_accuracy']:.1f}% "
            f"(round {row['best_round']}), final {100 * row['final_accuracy']:.1f}% "
            f"({100 * row['final_with_batchnorm_reestimated']:.1f}% with BatchNorm re-estimated)",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
