"""A FedFT-EDS client's peak memory and time per round at several local-data sizes (issue: deployment).

    python -m benchmarks.edge_client [--sizes 500 2000 5000] [--rounds 3] [--threads 0]

Each size runs in a fresh Python process (so peak memory is that client's alone): WRN-16-1, FedFT-EDS
defaults (freeze mid, P_ds 10%, E = 5, batch 64), the first N training images of Fashion-MNIST-mini,
``rounds`` rounds of ``client_app.local_update.local_update`` (what the ClientApp runs) with the
in-memory feature cache. Reported per size: round 1 (builds the cache) and the median of later rounds,
the cached features' size, and the process's peak resident memory (``ru_maxrss``), next to that of a
process that only imported torch and built the model. Results: ``benchmarks/results/edge_client.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results" / "edge_client.json"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(size: int, rounds: int, threads: int) -> dict:
    """One client's rounds at ``size`` samples (run inside a fresh process)."""
    from client_app.feature_cache import FeatureCache
    from client_app.local_data import LocalData
    from client_app.local_update import local_update
    from client_app.threads import use_threads
    from data.catalog import DATASETS
    from data.image_data import ImageData
    from data.loading import load_dataset
    from run_config import build_model_for
    from run_config.defaults import default_config

    config = default_config(method="fedft-eds", dataset="fashion-mnist-mini", client_threads=threads)
    use_threads(config.client_threads)
    torch.set_flush_denormal(True)
    model = build_model_for(config, seed=0)
    baseline = peak_rss_mb()
    train = load_dataset("fashion-mnist-mini").train
    if size > len(train):
        raise SystemExit(f"at most {len(train)} samples available")
    data = LocalData.from_images(ImageData(train.images[:size], train.labels[:size]), DATASETS[config.dataset])
    cache = FeatureCache(max_bytes=4 * 2**30)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    seconds, results = [], []
    for server_round in range(1, rounds + 1):
        model.load_state_dict(state)  # every round starts from the same global model, as after aggregation
        tick = time.perf_counter()
        result = local_update(model, data, config, server_round=server_round, partition_id=0,
                              learning_rate=config.learning_rate, cache=cache, cache_key=size,
                              device=torch.device("cpu"))
        seconds.append(time.perf_counter() - tick)
        results.append(result)
    features = cache.get((size, config.feature_cache_dtype))
    return {
        "samples": size,
        "selected": results[0].num_examples,
        "threads": torch.get_num_threads(),
        "round1_seconds": seconds[0],
        "round1_cache_seconds": results[0].cache_seconds,
        "later_round_seconds_median": statistics.median(seconds[1:]) if rounds > 1 else None,
        "feature_cache_mb": features.numel() * features.element_size() / 2**20 if features is not None else 0.0,
        "peak_rss_mb": peak_rss_mb(),
        "model_only_peak_rss_mb": baseline,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.edge_client", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = all cores, as on a device")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one size in this process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.rounds, args.threads)))
        return 0
    rows = []
    for size in args.sizes:
        out = subprocess.run([sys.executable, "-m", "benchmarks.edge_client", "--one", str(size), "--rounds", str(args.rounds),
                              "--threads", str(args.threads)], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": platform.machine(), "cpus": torch.get_num_threads(), "rows": rows}, indent=2) + "\n")
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
