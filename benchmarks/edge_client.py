"""A FedFT-EDS client's peak memory and time per round at several local-data sizes, as a small node runs it.

    python -m benchmarks edge-client [--sizes 500 2000 5000] [--rounds 3] [--threads 0] [--modes ...]

Each (size, mode) runs in a fresh Python process, so its peak memory is that client's alone. The client reads only
its own samples from a node folder (``data-path``, written here from the first N Fashion-MNIST-mini training
images), holds them as uint8, and runs ``rounds`` rounds of ``client_app.local_update.local_update`` (what the
ClientApp runs: WRN-16-1, FedFT-EDS defaults: freeze mid, P_ds 10%, E = 5, batch 64, float16 feature cache).
Modes (the cache's memory tier is bounded by ``feature-cache-mb``):

- ``memory``: the defaults: the features fit the memory tier (``feature-cache-mb`` 2048; its file mapped), forward
  passes in batches of ``eval-batch-size`` (64);
- ``small-node``: what a small device sets in its node config: ``feature-cache-mb`` 16 with a cache folder (the
  features are written once and streamed from the file a chunk at a time every round, never held whole) and
  ``eval-batch-size`` 64 (the default since 23 November 2026; 500 before);
- ``none``: ``feature-cache = false``: φ is recomputed every round.

Reported per run: round 1 (builds the cache) and the median of later rounds, the selected count, the process's peak
resident memory (``ru_maxrss``) next to that of the same process after importing the client and building the model
(``import_peak_rss_mb``), and a digest of the final θ (equal digests: the modes trained the same model).
Results: ``measurements/benchmarks/edge_client.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR, command_line

NAME = "edge-client"
RESULTS = RESULTS_DIR / "edge_client.json"
MODES: dict[str, tuple[dict[str, Any], bool]] = {  # mode -> (run-config overrides, whether the cache gets a folder)
    "memory": ({}, False),
    "small-node": ({"feature_cache_mb": 16, "eval_batch_size": 64}, True),
    "none": ({"feature_cache": False}, False),
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def write_node(size: int, folder: Path) -> None:
    """The first ``size`` training images of the embedded set as a node folder (done outside the measured process)."""
    from data.image_data import ImageData
    from data.loading import load_dataset
    from data.node_data import write_node_folder

    train = load_dataset("fashion-mnist-mini").train
    if size > len(train):
        raise SystemExit(f"at most {len(train)} samples available")
    write_node_folder(folder, ImageData(train.images[:size], train.labels[:size]), "fashion-mnist-mini", 0, 1, {})


def measure(folder: Path, mode: str, rounds: int, threads: int, cache_dir: Path) -> dict:
    """One client's rounds from ``folder`` in ``mode`` (run inside a fresh process)."""
    from client_app.feature_cache import FeatureCache
    from client_app.local_data import load_node_local_data
    from client_app.local_update import local_update
    from client_app.threads import use_threads
    from methods.registry import default_config
    from run_config import build_model_for

    overrides, with_folder = MODES[mode]
    config = default_config(method="fedft-eds", dataset="fashion-mnist-mini", client_threads=threads, **overrides)
    use_threads(config.client_threads)
    torch.set_flush_denormal(True)
    model = build_model_for(config, seed=0)
    import_peak = peak_rss_mb()
    data = load_node_local_data(str(folder), config.dataset)
    cache = FeatureCache(config.feature_cache_mb * 2**20, cache_dir if with_folder else None)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    seconds, results = [], []
    for server_round in range(1, rounds + 1):
        model.load_state_dict(state)  # every round starts from the same global model, as after aggregation
        tick = time.perf_counter()
        result = local_update(
            model,
            data,
            config,
            server_round=server_round,
            partition_id=0,
            learning_rate=config.learning_rate,
            cache=cache if config.feature_cache else None,
            cache_key="node",
            device=torch.device("cpu"),
        )
        seconds.append(time.perf_counter() - tick)
        results.append(result)
    theta = b"".join(v.numpy().tobytes() for k, v in model.state_dict().items() if k in model.upper_state_keys("mid"))
    return {
        "samples": len(data),
        "mode": mode,
        "selected": results[0].num_examples,
        "threads": torch.get_num_threads(),
        "round1_seconds": seconds[0],
        "round1_cache_seconds": results[0].cache_seconds,
        "later_round_seconds_median": statistics.median(seconds[1:]) if rounds > 1 else None,
        "peak_rss_mb": peak_rss_mb(),
        "import_peak_rss_mb": import_peak,
        "theta_digest": hashlib.sha1(theta).hexdigest()[:12],
    }


def table(recorded: dict[str, Any]) -> str:
    """The recorded rows as a Markdown table."""
    lines = [
        "| local samples | mode | selected | threads | round 1 (s) | later rounds, median (s) | peak RSS (MB) "
        "| after imports (MB) | θ digest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in recorded["rows"]:
        later = r["later_round_seconds_median"]
        lines.append(
            f"| {r['samples']:,} | {r['mode']} | {r['selected']} | {r['threads']} | {r['round1_seconds']:.2f} "
            f"| {'–' if later is None else f'{later:.2f}'} | {r['peak_rss_mb']:.0f} | {r['import_peak_rss_mb']:.0f} "
            f"| {r['theta_digest']} |"
        )
    return "\n".join(lines)


def recorded_figure() -> str:
    return table(json.loads(RESULTS.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = all cores, as on a device")
    parser.add_argument("--one", nargs=3, metavar=("FOLDER", "MODE", "CACHE_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        folder, mode, cache_dir = args.one
        print(json.dumps(measure(Path(folder), mode, args.rounds, args.threads, Path(cache_dir))))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            folder = Path(tmp) / f"node-{size}"
            write_node(size, folder)
            for mode in args.modes:
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks",
                        NAME,
                        "--one",
                        str(folder),
                        mode,
                        str(Path(tmp) / f"cache-{size}-{mode}"),
                        "--rounds",
                        str(args.rounds),
                        "--threads",
                        str(args.threads),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"machine": platform.machine(), "cpus": torch.get_num_threads(), "rows": rows}, indent=2) + "\n"
    )
    print(f"written to {RESULTS}")
    return 0
