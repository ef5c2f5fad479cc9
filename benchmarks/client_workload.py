"""Client workload per round, measured side by side on one partition (issue: FedFT-EDS benchmarks).

    python -m benchmarks.client_workload [--dataset fashion-mnist-mini] [--rounds 4] [--threads 1]

For each method the client's round (``client_app.local_update.local_update``, exactly what the ClientApp
runs) is timed on the same partition from the same global model; methods are interleaved round by
round so that machine noise hits them alike. Reported: the median ``train_seconds`` over rounds 2.. (round 1
builds the feature cache, reported apart as ``cache_seconds``), and a reference for the cached FedFT-EDS
round: θ's forward pass over all local samples plus θ's training steps on the selected ones, timed as
bare operations.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR
from client_app.feature_cache import FeatureCache
from client_app.local_data import LocalData, load_local_data
from client_app.local_update import UpdateResult, frozen_features, local_update
from methods.registry import default_config
from models.device import resolve_device
from models.training import cross_entropy_of, predict_logits, train_epochs
from run_config import RunConfig, build_model_for, federated_split

VARIANTS: dict[str, dict[str, Any]] = {  # label -> run-config overrides
    "fedavg": {"method": "fedavg"},
    "fedft-all": {"method": "fedft-all"},
    "fedft-rds 10%": {"method": "fedft-rds"},
    "fedft-eds 10%": {"method": "fedft-eds"},
    "fedft-eds 50%": {"method": "fedft-eds", "selection_fraction": 0.5},
    "fedft-eds 10% no cache": {"method": "fedft-eds", "feature_cache": False},
}


def client_round(
    config: RunConfig,
    global_state: dict[str, torch.Tensor],
    data: LocalData,
    server_round: int,
    partition_id: int,
    device: torch.device,
    cache: FeatureCache | None,
) -> tuple[UpdateResult, float]:
    """One client round from ``global_state``, as the ClientApp runs it, and its wall seconds."""
    model = build_model_for(config)
    model.load_state_dict(copy.deepcopy(global_state))
    tick = time.perf_counter()
    result = local_update(
        model,
        data,
        config,
        server_round=server_round,
        partition_id=partition_id,
        learning_rate=config.learning_rate,
        device=device,
        cache=cache,
        cache_key="client",
    )
    return result, time.perf_counter() - tick


def reference_seconds(model, data, config, device: torch.device) -> float:
    """θ forward over all cached features + θ training on ⌈0.1·n⌉ of them, as bare operations."""
    level = config.freeze
    model.to(device).set_frozen(level)
    features = frozen_features(model, data, level, config.eval_batch_size, device, torch.float32).to(device)
    labels = data.labels.to(device)
    k = max(1, -(-len(data) // 10))
    tick = time.perf_counter()
    model.eval()
    predict_logits(lambda h: model.forward_from(h, level), features, config.eval_batch_size)
    model.set_frozen(level)
    train_epochs(
        cross_entropy_of(lambda h: model.forward_from(h.float(), level)),
        model.upper_parameters(level),
        features[:k],
        labels[:k],
        epochs=config.local_epochs,
        batch_size=config.batch_size,
        lr=config.learning_rate,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
    )
    return time.perf_counter() - tick


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--num-partitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a simulated client gets 1 core)")
    parser.add_argument("--device", default="cpu", help="device to compute on (auto, cpu, cuda, cuda:N, mps)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "client_workload.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    device = resolve_device(args.device, key="--device")

    base = dict(dataset=args.dataset, partitioner="iid", pretrain="none")
    configs = {label: default_config(**base, **over) for label, over in VARIANTS.items()}
    any_config = configs["fedavg"]
    data = load_local_data(federated_split(any_config), args.partition, args.num_partitions)
    global_state = build_model_for(any_config, seed=0).state_dict()
    caches = {label: FeatureCache(8 * 2**30) for label in VARIANTS}
    seconds: dict[str, list[float]] = {label: [] for label in VARIANTS}
    cache_seconds = {label: 0.0 for label in VARIANTS}
    reference = []
    for rnd in range(1, args.rounds + 1):
        for label, config in configs.items():
            cache = caches[label] if config.feature_cache else None
            result, _ = client_round(config, global_state, data, rnd, args.partition, device, cache)
            seconds[label].append(result.train_seconds)
            cache_seconds[label] += result.cache_seconds
        model = build_model_for(configs["fedft-eds 10%"])
        model.load_state_dict(copy.deepcopy(global_state))
        reference.append(reference_seconds(model, data, configs["fedft-eds 10%"], device))

    median = {label: statistics.median(s[1:]) for label, s in seconds.items()}
    ref = statistics.median(reference[1:])
    report: dict[str, Any] = {
        "setting": {
            "dataset": args.dataset,
            "model": any_config.model,
            "local_samples": len(data),
            "local_epochs": any_config.local_epochs,
            "batch_size": any_config.batch_size,
            "torch_threads": args.threads,
            "device": str(device),
            "rounds": args.rounds,
            "machine": platform.processor() or platform.machine(),
        },
        "median_train_seconds": median,
        "cache_build_seconds": cache_seconds,
        "reference_theta_seconds": ref,
        "ratio_to_fedavg": {label: m / median["fedavg"] for label, m in median.items()},
        "eds10_cached_over_reference": median["fedft-eds 10%"] / ref,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"{len(data)} local samples, {any_config.model}, E={any_config.local_epochs}, batch {any_config.batch_size}, "
        f"{args.threads} thread(s); median of rounds 2-{args.rounds}"
    )
    print("| method | seconds per round | × fedavg | one-off cache build (s) |\n|---|---|---|---|")
    for label in VARIANTS:
        print(
            f"| {label} | {median[label]:.3f} | {median[label] / median['fedavg']:.3f} | {cache_seconds[label]:.2f} |"
        )
    print(
        f"reference (θ forward on all + θ training on 10%): {ref:.3f} s; "
        f"cached fedft-eds 10% / reference = {median['fedft-eds 10%'] / ref:.2f}"
    )
    return report


if __name__ == "__main__":
    main()
