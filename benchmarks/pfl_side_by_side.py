"""One FedAvg job run three ways, alternating: this app's Flower path, its in-process path, and pfl-research.

    python -m benchmarks pfl-side-by-side [--pairs 3] [--clients 100] [--pfl-python /tmp/pfl-venv/bin/python]
    python -m benchmarks pfl-side-by-side --method fedft-eds [--pairs 3]   # the FedFT-EDS variant of the job
    python -m benchmarks pfl-side-by-side export --out JOB.npz     # the job file alone

The job (issue 35): FedAvg, LeNet-5, full Fashion-MNIST split IID over 100 clients (no server hold-out:
``public-fraction = 0``, 600 images each), 10 clients a round, 1 local epoch, batch 32, SGD with the app's
learning rate, momentum and weight decay, 30 rounds, plain weighted mean (``aggregation = mean``), central
evaluation of the 10,000 test images after every round, one torch thread everywhere (``client-threads = 1``,
``OMP_NUM_THREADS=1`` in every process). ``--clients 1000`` runs the same job over 1,000 clients (60 images each),
still 10 a round. ``--method fedft-eds`` runs the job as FedFT-EDS (``FEDFT_EDS_JOB``): φ frozen from MNIST
pretraining, θ trained on each client's 10% highest-entropy samples, ranked every round with the global model.

- **app, Flower**: ``python -m simulation --num-supernodes 100`` (SuperLink, Ray, one ClientApp actor per CPU).
- **app, in-process**: the ServerApp's main against in-process nodes (``simulation.in_process``): no Ray, no
  SuperLink, the clients one after another, in a fresh process (``in-process-run`` below).
- **pfl**: ``benchmarks/pfl_job.py`` in pfl's own virtual environment (``pfl[pytorch]==0.6.0`` from the registry,
  torch pinned by ``constraints-cpu.txt``), one process.

pfl gets the job from a file written here with the app's own code (``export``): the images, the app's partition
table, its initial weights (sha256 checked by pfl_job.py before it trains), each round's cohort and each client's
batch order as the app draws them from the seed, so the three compute the same job; this script checks that the
app's runs trained those cohorts and that all three scored the same initial model.

Each run records its whole-process seconds (measured here, from start to exit), its per-round seconds (the app's
``wall_seconds`` in rounds.jsonl, pfl_job.py's after each round's evaluation; start-up = whole − rounds) and the load
average before and after. The three run in turn in every pair, the order rotated from pair to pair (so the load
falls on each alike); medians over the pairs and the ratios app ÷ pfl go to
``measurements/benchmarks/pfl_side_by_side.json`` and ``.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import RESULTS_DIR, command_line, json_lines
from data.catalog import DatasetInfo
from run_config import RunConfig
from run_config.text import format_overrides

#: The job, in the app's run-config keys.
JOB: dict[str, object] = {
    "method": "fedavg",
    "model": "lenet5",
    "dataset": "fashion-mnist",
    "partitioner": "iid",
    "public-fraction": 0.0,
    "pretrain": "none",
    "num-server-rounds": 30,
    "local-epochs": 1,
    "batch-size": 32,
    "fraction-train": 0.1,
    "learning-rate": 0.1,
    "momentum": 0.5,
    "weight-decay": 1e-05,
    "aggregation": "mean",
    "client-threads": 1,
    "eval-batch-size": 64,
    "seed": 0,
    "device": "cpu",
    "server-device": "cpu",
}
#: The same job run by FedFT-EDS (``--method fedft-eds``): LeNet-5's φ (up to ``mid``) frozen, pretrained on MNIST
#: (the app's cached pretraining; all three systems start from those weights and none counts the pretraining), θ
#: trained on each client's 10% highest-entropy samples (ρ = 0.1) under the round's global model. Features are kept in
#: memory only (``feature-cache-dir = ""``): the disk cache would hand a later run φ(x) an earlier one computed.
FEDFT_EDS_JOB: dict[str, object] = {**JOB, "method": "fedft-eds", "pretrain": "dataset", "feature-cache-dir": ""}
JOBS = {"fedavg": JOB, "fedft-eds": FEDFT_EDS_JOB}
CLIENTS = 100
#: Clients a round, whatever the population (``--clients 1000``: fraction-train 0.01).
PER_ROUND = 10


def job_for(clients: int, method: str = "fedavg") -> dict[str, object]:
    """The job of ``method`` (a key of ``JOBS``) for a population of ``clients``: ``PER_ROUND`` of them a round."""
    return {**JOBS[method], "fraction-train": PER_ROUND / clients}


NAME = "pfl-side-by-side"
PFL_PYTHON = Path("/tmp/pfl-venv/bin/python")
#: The recorded runs docs/benchmarks.md shows, by what they measured.
RECORDED = {
    "FedAvg, 100 clients (600 images each)": "pfl_side_by_side.json",
    "FedAvg, 100 clients, the central evaluator in channels-last": "pfl_side_by_side_scoring_layout.json",
    "FedAvg, 1,000 clients (60 images each)": "pfl_side_by_side_1000.json",
    "FedFT-EDS, 100 clients": "pfl_side_by_side_fedft_eds.json",
    "FedFT-EDS, 100 clients, φ decoded once per process": "pfl_side_by_side_fedft_eds_phi_once.json",
}
SYSTEMS = ("app-flower", "app-in-process", "pfl")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def state_checksum(state: dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict: each name, then its values as contiguous little-endian float32 (pfl_job.py has the
    same function)."""
    digest = hashlib.sha256()
    for name, tensor in state.items():
        digest.update(name.encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().cpu().numpy().astype("<f4").tobytes())
    return digest.hexdigest()


def export(out: Path, overrides: dict[str, object] = JOB, clients: int = CLIENTS) -> dict[str, Any]:
    """Write the job file pfl_job.py reads, from the app's own split, initial weights, cohorts and batch orders."""
    from client_app.local_update import round_seed
    from data.federated import split_table
    from data.loading import shared_dataset
    from data.sample_share import selection_size
    from methods.registry import config_with_overrides
    from run_config import data_cache, federated_split
    from server_app.pretraining import initial_state
    from strategies.random_selection import cohort_size, select_random

    config = config_with_overrides(format_overrides(overrides))
    fedavg = (config.data_selection, config.freeze) == ("all", "none")
    fedft_eds = config.data_selection == "entropy" and config.freeze != "none" and config.objective == "plain"
    if config.local_epochs != 1 or not (fedavg or fedft_eds):
        raise ValueError("the export covers one local epoch of FedAvg on all local data or of FedFT-EDS")
    if fedft_eds and (config.augment or not config.feature_cache or config.feature_cache_dtype != "float16"):
        raise ValueError("pfl_job.py runs FedFT-EDS on φ(x) cached once in float16, without augmentation")
    split, cache = federated_split(config), data_cache(config)
    data = shared_dataset(config.dataset, config.data_dir, cache)
    table = split_table(split, clients, cache)
    parts = [np.asarray(table.client_indices(p), dtype=np.int64) for p in range(clients)]
    positions = np.concatenate(parts)
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    state = initial_state(config)
    per_round = cohort_size(clients, float(config.fraction_train))
    cohorts = np.array(
        [
            select_random(list(range(clients)), per_round, config.seed, r)
            for r in range(1, config.num_server_rounds + 1)
        ],
        dtype=np.int64,
    )
    orders, order_offsets = [], [0]
    for r, cohort in enumerate(cohorts, start=1):
        for pid in cohort:  # the generator local_update makes; neither "all" nor "entropy" draws from it first
            generator = torch.Generator().manual_seed(round_seed(config.seed, r, int(pid)))
            rows = len(parts[pid]) if fedavg else selection_size(len(parts[pid]), config.selection_fraction)
            order = torch.randperm(rows, generator=generator).numpy()
            orders.append(order)
            order_offsets.append(order_offsets[-1] + len(order))
    info = split.info
    settings = {
        "learning_rate": config.learning_rate,
        "momentum": config.momentum,
        "weight_decay": config.weight_decay,
        "local_epochs": config.local_epochs,
        "batch_size": config.batch_size,
        "eval_batch_size": config.eval_batch_size,
        "num_classes": info.num_classes,
        "seed": config.seed,
        "overrides": {k: v for k, v in overrides.items()},
        "clients": clients,
        "method": "fedavg" if fedavg else "fedft-eds",
        "freeze": config.freeze,
        "temperature": config.temperature,
        "selection_size": selection_size(len(parts[0]), config.selection_fraction),
    }
    if fedft_eds and len({len(p) for p in parts}) != 1:
        raise ValueError("the FedFT-EDS export needs equal partitions (one selection size)")
    names = list(state)
    split_digest = hashlib.sha256(positions.astype("<i8").tobytes() + offsets.astype("<i8").tobytes()).hexdigest()
    arrays: dict[str, Any] = {
        "settings": np.array(json.dumps(settings)),
        "train_images": np.asarray(data.train.images),
        "train_labels": np.asarray(data.train.labels),
        "test_images": np.asarray(data.test.images),
        "test_labels": np.asarray(data.test.labels),
        "mean": np.array(info.mean, dtype=np.float32),
        "std": np.array(info.std, dtype=np.float32),
        "pad_to_32": np.array(info.pad_to_32),
        "client_positions": positions,
        "client_offsets": offsets,
        "split_sha256": np.array(split_digest),
        "cohorts": cohorts,
        "orders": np.concatenate(orders).astype(np.int64),
        "order_offsets": np.array(order_offsets, dtype=np.int64),
        "init_names": np.array(json.dumps(names)),
        "init_sha256": np.array(state_checksum(state)),
        **{f"init_{i}": state[name].detach().cpu().numpy() for i, name in enumerate(names)},
    }
    if fedft_eds:
        chosen = first_round_selections(
            config, state, np.asarray(data.train.images), np.asarray(data.train.labels), parts, cohorts[0], info
        )
        arrays["first_selections"] = np.concatenate(chosen).astype(np.int64)
        arrays["first_selection_offsets"] = np.concatenate([[0], np.cumsum([len(c) for c in chosen])]).astype(np.int64)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as handle:
        np.savez(handle, **arrays)
    return {
        "init_sha256": state_checksum(state),
        "split_sha256": split_digest,
        "partition_sizes": sorted(set(int(len(p)) for p in parts)),
        "cohorts": cohorts.tolist(),
    }


def first_round_selections(
    config: RunConfig,
    state: dict[str, torch.Tensor],
    images: np.ndarray,
    labels: np.ndarray,
    parts: list[np.ndarray],
    cohort: np.ndarray,
    info: DatasetInfo,
) -> list[np.ndarray]:
    """Each round-1 client's FedFT-EDS selection, by the app's own functions from the initial model: φ(x) as the
    feature cache holds it (``frozen_features``), the entropy pass (``sample_entropies``), the top share."""
    from client_app.data_selection import select_samples
    from client_app.feature_sources import InMemory
    from client_app.local_data import LocalData
    from client_app.local_update import CACHE_DTYPES, frozen_features, sample_entropies
    from run_config import build_model_for

    model = build_model_for(config)
    model.load_state_dict(state)
    model.set_frozen(config.freeze)  # φ in eval mode, as local_update reads it
    level, batch, cpu = config.freeze, config.eval_batch_size, torch.device("cpu")
    chosen = []
    for pid in cohort:
        data = LocalData(torch.as_tensor(images[parts[pid]]), torch.as_tensor(labels[parts[pid]]), info)
        features = InMemory(frozen_features(model, data, level, batch, cpu, CACHE_DTYPES[config.feature_cache_dtype]))
        entropies = sample_entropies(model, features, level, batch, cpu, config.temperature)
        chosen.append(select_samples("entropy", entropies, config.selection_fraction, torch.Generator()).numpy())
    return chosen


def in_process_run(results_dir: Path, run_name: str, clients: int, method: str) -> int:
    """One in-process run of the job (the app's ``--in-process`` runner), in this process."""
    from simulation.in_process import run_cell_in_process
    from simulation.local_run import Resources

    config = {**job_for(clients, method), "results-dir": str(results_dir), "run-name": run_name}
    results_dir.mkdir(parents=True, exist_ok=True)
    return run_cell_in_process(config, clients, Resources(), results_dir / f"{run_name}.log")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _summarise(system: str, wall: float, code: int, rounds: list[dict[str, Any]], extra: dict[str, Any]) -> dict:
    seconds = [float(r["wall_seconds"]) for r in rounds]
    return {
        "system": system,
        "exit_code": code,
        "whole_seconds": wall,
        "rounds": len(rounds),
        "round_seconds": seconds,
        "round_seconds_median": statistics.median(seconds) if seconds else None,
        "later_round_seconds_median": statistics.median(seconds[1:]) if len(seconds) > 1 else None,
        "rounds_seconds_sum": sum(seconds),
        "startup_and_shutdown_seconds": wall - sum(seconds),
        "accuracies": [r["accuracy"] for r in rounds],
        "final_accuracy": rounds[-1]["accuracy"] if rounds else None,
        "cohorts": [r.get("clients") for r in rounds],
        **extra,
    }


def run_one(
    system: str, work: Path, job_file: Path, pfl_python: Path, tag: str, clients: int, method: str
) -> dict[str, Any]:
    """Run ``system`` once; its record (load before and after included)."""
    from benchmarks.measured_run import run_simulation_measured

    env = {**os.environ, **ONE_THREAD}
    load_before = _load()
    if system == "app-flower":
        run = run_simulation_measured(
            job_for(clients, method),
            num_supernodes=clients,
            results_dir=work / tag,
            log_file=work / f"{tag}.log",
            env=ONE_THREAD,
        )
        record = _summarise(
            system,
            run.wall_seconds,
            run.exit_code,
            run.rounds,
            {
                "initial_accuracy": run.summary.get("initial_accuracy"),
                "peak_pss_gib": run.peak_pss_gib,
                "status": run.summary.get("status"),
            },
        )
    elif system == "app-in-process":
        command = [sys.executable, "-m", "benchmarks", NAME, "in-process-run", "--results-dir", str(work)]
        command += ["--run-name", tag, "--clients", str(clients), "--method", method]
        tick = time.perf_counter()
        with (work / f"{tag}.stdout").open("wb") as log:
            code = subprocess.call(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - tick
        folder = work / tag
        rounds_file, summary_file = folder / "rounds.jsonl", folder / "summary.json"
        rounds = [json.loads(line) for line in rounds_file.read_text().splitlines()] if rounds_file.exists() else []
        summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        record = _summarise(
            system,
            wall,
            code,
            rounds,
            {"initial_accuracy": summary.get("initial_accuracy"), "status": summary.get("status")},
        )
    else:
        out = work / f"{tag}.json"
        command = [str(pfl_python), str(Path(__file__).with_name("pfl_job.py")), "--job", str(job_file)]
        command += ["--out", str(out)]
        tick = time.perf_counter()
        with (work / f"{tag}.stdout").open("wb") as log:
            code = subprocess.call(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        wall = time.perf_counter() - tick
        result = json.loads(out.read_text()) if out.exists() else {}
        record = _summarise(
            system,
            wall,
            code,
            result.get("rounds", []),
            {
                "initial_accuracy": result.get("initial_accuracy"),
                "init_sha256": result.get("init_sha256"),
                "split_sha256": result.get("split_sha256"),
                "pfl_version": result.get("pfl_version"),
                "torch_threads": result.get("torch_threads"),
                "import_seconds": result.get("import_seconds"),
                "setup_seconds": result.get("setup_seconds"),
                "first_round_selections_match_app": result.get("first_round_selections_match_app"),
            },
        )
    record["load_before"], record["load_after"] = load_before, _load()
    return record


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise_pairs(records: list[dict[str, Any]], export_info: dict[str, Any]) -> dict[str, Any]:
    """Medians per system, ratios app ÷ pfl (of the medians, and the median of the pairs' ratios), checks."""
    ok = [r for r in records if r["exit_code"] == 0 and r["rounds"] == JOB["num-server-rounds"]]
    by_system = {s: [r for r in ok if r["system"] == s] for s in SYSTEMS}
    medians: dict[str, dict[str, float | None]] = {}
    for system, runs in by_system.items():
        medians[system] = {
            "runs": len(runs),
            "whole_seconds": _median([r["whole_seconds"] for r in runs]),
            "round_seconds": _median([r["round_seconds_median"] for r in runs]),
            "later_round_seconds": _median([r["later_round_seconds_median"] for r in runs]),
            "startup_and_shutdown_seconds": _median([r["startup_and_shutdown_seconds"] for r in runs]),
            "final_accuracy": _median([r["final_accuracy"] for r in runs]),
        }
    ratios: dict[str, dict[str, float | None]] = {}
    for system in SYSTEMS[:2]:
        entry: dict[str, float | None] = {}
        for key in ("whole_seconds", "round_seconds", "startup_and_shutdown_seconds"):
            a, b = medians[system][key], medians["pfl"][key]
            entry[f"{key}_of_medians"] = a / b if a is not None and b else None
        pair_ratios = {"whole_seconds": [], "round_seconds_median": []}  # type: dict[str, list[float]]
        for pair in {r["pair"] for r in ok}:
            mine = [r for r in by_system[system] if r["pair"] == pair]
            theirs = [r for r in by_system["pfl"] if r["pair"] == pair]
            if mine and theirs:
                for key in pair_ratios:
                    pair_ratios[key].append(mine[0][key] / theirs[0][key])
        entry["whole_seconds_median_of_pair_ratios"] = _median(pair_ratios["whole_seconds"])
        entry["round_seconds_median_of_pair_ratios"] = _median(pair_ratios["round_seconds_median"])
        ratios[f"{system} / pfl"] = entry
    expected = export_info["cohorts"]
    checks = {
        "init_sha256_app": export_info["init_sha256"],
        "pfl_loaded_same_weights": all(r.get("init_sha256") == export_info["init_sha256"] for r in by_system["pfl"]),
        "pfl_used_same_split": all(r.get("split_sha256") == export_info["split_sha256"] for r in by_system["pfl"]),
        "pfl_round_1_selections_equal_the_apps": [r.get("first_round_selections_match_app") for r in by_system["pfl"]],
        "app_runs_trained_the_exported_cohorts": all(
            r["cohorts"] == expected for s in SYSTEMS[:2] for r in by_system[s]
        ),
        "initial_accuracies": sorted({round(float(r["initial_accuracy"]), 6) for r in ok if r["initial_accuracy"]}),
        "partition_sizes": export_info["partition_sizes"],
    }
    finals = {s: sorted(r["final_accuracy"] for r in runs) for s, runs in by_system.items()}
    return {
        "medians": medians,
        "ratios": ratios,
        "checks": checks,
        "final_accuracies": finals,
        "trajectories": trajectories(by_system),
    }


def trajectories(by_system: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """How far the runs' per-round test accuracies lie apart: within a system (the same computation should give the
    same numbers every time) and between the app and pfl (the same job; float rounding makes them drift apart)."""
    first = {s: runs[0]["accuracies"] for s, runs in by_system.items() if runs}
    out: dict[str, Any] = {
        "repeatable": {
            s: all(r["accuracies"] == runs[0]["accuracies"] for r in runs) for s, runs in by_system.items() if runs
        }
    }
    if "pfl" in first:
        for system in SYSTEMS[:2]:
            if system not in first:
                continue
            gaps = [abs(a - b) for a, b in zip(first[system], first["pfl"], strict=True)]
            same = next((i for i, g in enumerate(gaps) if g > 5e-5), len(gaps))  # accuracies agree to 4 decimals
            out[f"{system} vs pfl"] = {
                "rounds_agreeing_to_4_decimals_from_the_start": same,
                "largest_gap_points": 100 * max(gaps),
                "final_gap_points": 100 * gaps[-1],
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    method = result.get("method", "fedavg")
    population = "" if result["clients"] == CLIENTS else f" --clients {result['clients']}"
    population += "" if method == "fedavg" else f" --method {method}"
    title = {"fedavg": "FedAvg", "fedft-eds": "FedFT-EDS"}[method]
    lines = [
        f"# The same {title} job: this app (Flower, in-process) beside pfl-research",
        "",
        f"Measured (last run) {result['date']} on {result['machine']}; `python -m benchmarks {NAME}"
        f"{population}`, {result['pairs']} pairs (`--append` adds pairs). Job: {result['job_text']}, "
        f"{result['clients']} clients. pfl "
        f"{result['pfl_version']} in its own venv. Each pair runs the three in turn (order rotated); load = 1-minute "
        "load average before each run (2 shared cores).",
        "",
        "pfl's environment: `python3 -m venv /tmp/pfl-venv && /tmp/pfl-venv/bin/pip install -c constraints-cpu.txt "
        "torch && /tmp/pfl-venv/bin/pip install -c constraints-cpu.txt 'pfl[pytorch]==0.6.0'` (from the registry: pfl "
        "0.6.0, torch 2.13.0+cpu, numpy 2.4.6). pfl runs `benchmarks/pfl_job.py`: FederatedAveraging, "
        "SimulatedBackend, PyTorchModel with torch.optim.SGD, central SGD of lr 1, its CentralEvaluationCallback "
        "every round, its per-client scoring around each update off (the app's clients make no such pass). The app's "
        "runs and pfl share the app's split, initial weights, cohorts and batch orders (exported by the app; checks "
        "below).",
        "",
        "| system | runs | whole process (s), median | per round (s), median | start-up + shut-down (s) "
        "| final accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for system in SYSTEMS:
        m = s["medians"][system]
        if not m["runs"]:
            lines.append(f"| {system} | 0 | – | – | – | – |")
            continue
        lines.append(
            f"| {system} | {m['runs']} | {m['whole_seconds']:.1f} | {m['round_seconds']:.2f} | "
            f"{m['startup_and_shutdown_seconds']:.1f} | {m['final_accuracy']:.4f} |"
        )
    lines += ["", "| ratio | whole process | per round | per round, median of the pairs' ratios |", "|---|---|---|---|"]
    for name, r in s["ratios"].items():

        def fmt(x: float | None) -> str:
            return f"{x:.2f}×" if x is not None else "–"

        lines.append(
            f"| {name} | {fmt(r['whole_seconds_of_medians'])} | {fmt(r['round_seconds_of_medians'])} | "
            f"{fmt(r['round_seconds_median_of_pair_ratios'])} |"
        )
    lines += [
        "",
        "Every run:",
        "",
        "| pair | system | whole (s) | round median (s) | final accuracy | load before → after |",
    ]
    lines.append("|---|---|---|---|---|---|")
    for r in result["runs"]:
        med = f"{r['round_seconds_median']:.2f}" if r["round_seconds_median"] is not None else "–"
        acc = f"{r['final_accuracy']:.4f}" if r["final_accuracy"] is not None else f"exit {r['exit_code']}"
        lines.append(
            f"| {r['pair']} | {r['system']} | {r['whole_seconds']:.1f} | {med} | {acc} | "
            f"{r['load_before'][0]} → {r['load_after'][0]} |"
        )
    c = s["checks"]
    lines += [
        "",
        f"Checks: pfl loaded the app's initial weights (sha256 {c['init_sha256_app'][:16]}…): "
        f"{c['pfl_loaded_same_weights']}; the same partition table: {c['pfl_used_same_split']}; the app's runs "
        f"trained the exported cohorts: {c['app_runs_trained_the_exported_cohorts']}; initial accuracies seen "
        f"(all runs): {c['initial_accuracies']}; partition sizes {c['partition_sizes']}"
        + (
            "."
            if method == "fedavg"
            else f"; pfl's round-1 entropy selections equal to the app's (each pfl run): "
            f"{c.get('pfl_round_1_selections_equal_the_apps')}. pfl runs FedFT-EDS as `benchmarks/pfl_job.py`'s "
            "FedFTEDS: θ alone is pfl's model, on φ(x) computed once per client and once for the test set."
        ),
        "",
    ]
    t = s.get("trajectories", {})
    lines.append(f"Each system gave the same accuracy in every round of every run: {t.get('repeatable')}.")
    for name in ("app-flower vs pfl", "app-in-process vs pfl"):
        if name in t:
            g = t[name]
            lines.append(
                f"{name}: test accuracies equal to 4 decimals in the first "
                f"{g['rounds_agreeing_to_4_decimals_from_the_start']} rounds, then apart by float rounding: "
                f"at most {g['largest_gap_points']:.2f} points, "
                f"{g['final_gap_points']:.2f} after the last round."
            )
    lines.append("")
    return "\n".join(lines)


def ratio_table(result: dict[str, Any]) -> str:
    """Medians per system and, per app path, the median of the pairs' ratios to pfl (their range in brackets), as a
    Markdown table."""
    lines = [
        "| system | runs | whole process (s) | per round (s) | start-up + shut-down (s) | ÷ pfl, whole process "
        "| ÷ pfl, per round | final accuracy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = [r for r in result["runs"] if r["exit_code"] == 0 and r["rounds"] == JOB["num-server-rounds"]]
    pfl = {r["pair"]: r for r in ok if r["system"] == "pfl"}
    for system in SYSTEMS:
        m = result["summary"]["medians"][system]
        if not m["runs"]:
            continue
        cells = [f"{m['whole_seconds']:.1f}", f"{m['round_seconds']:.2f}", f"{m['startup_and_shutdown_seconds']:.1f}"]
        for key in ("whole_seconds", "round_seconds_median"):
            ratios = sorted(r[key] / pfl[r["pair"]][key] for r in ok if r["system"] == system and r["pair"] in pfl)
            middle = statistics.median(ratios) if ratios and system != "pfl" else None
            cells.append("–" if middle is None else f"{middle:.2f}× ({ratios[0]:.2f}–{ratios[-1]:.2f})")
        cells.append(f"{100 * m['final_accuracy']:.2f}%")
        lines.append(f"| {system} | {m['runs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recorded_figure() -> str:
    parts = []
    for what, name in RECORDED.items():
        result = json.loads((RESULTS_DIR / name).read_text())
        loads = [r["load_before"][0] for r in result["runs"]]
        parts.append(
            f"{what} (`{name}`, {result['pairs']} pairs, last run {result['date']}, 1-minute load "
            f"{min(loads):.1f}–{max(loads):.1f}):\n\n" + ratio_table(result)
        )
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    sub = parser.add_subparsers(dest="command")
    ex = sub.add_parser("export", help="write the job file pfl_job.py reads")
    ex.add_argument("--out", type=Path, required=True)
    inner = sub.add_parser("in-process-run", help="(internal) one in-process run of the job")
    inner.add_argument("--results-dir", type=Path, required=True)
    inner.add_argument("--run-name", required=True)
    inner.add_argument("--clients", type=int, default=CLIENTS)
    inner.add_argument("--method", choices=sorted(JOBS), default="fedavg")
    sub.add_parser("report", help="summarise the runs in --out again (after a change to the summary)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--pfl-python", type=Path, default=PFL_PYTHON)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--clients", type=int, default=CLIENTS, help=f"population, {PER_ROUND} of them a round")
    parser.add_argument("--method", choices=sorted(JOBS), default="fedavg", help="the job's method (JOBS)")
    parser.add_argument("--out", type=Path, default=None, help="default: pfl_side_by_side[_<clients>][_<method>].json")
    parser.add_argument("--append", action="store_true", help="add the pairs to those --out already holds")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs' files (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.out is None:
        suffix = "" if args.clients == CLIENTS else f"_{args.clients}"
        suffix += "" if args.method == "fedavg" else "_" + args.method.replace("-", "_")
        args.out = RESULTS_DIR / f"pfl_side_by_side{suffix}.json"
    if args.command == "export":
        info = export(args.out, job_for(args.clients, args.method), args.clients)
        print(json.dumps({k: v for k, v in info.items() if k != "cohorts"}))
        return 0
    if args.command == "in-process-run":
        return in_process_run(args.results_dir, args.run_name, args.clients, args.method)
    if args.command == "report":  # the summary and the Markdown again, from the runs the JSON holds
        recorded = json.loads(args.out.read_text())
        if "export" not in recorded:  # recorded before the JSON kept it: the same export, made again
            with tempfile.TemporaryDirectory() as tmp:
                recorded["export"] = export(Path(tmp) / "job.npz")
        recorded["summary"] = summarise_pairs(recorded["runs"], recorded["export"])
        args.out.write_text(json_lines(recorded))
        args.out.with_suffix(".md").write_text(markdown(recorded))
        print(markdown(recorded))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        job_file = work / "job.npz"
        tick = time.perf_counter()
        export_info = export(job_file, job_for(args.clients, args.method), args.clients)
        print(f"job exported in {time.perf_counter() - tick:.1f} s: {job_file}", flush=True)
        records: list[dict[str, Any]] = []
        if args.append and args.out.exists():  # more pairs of the same job beside those recorded
            recorded = json.loads(args.out.read_text())
            earlier = recorded.get("export") or export_info
            if (earlier["init_sha256"], earlier["split_sha256"]) != (
                export_info["init_sha256"],
                export_info["split_sha256"],
            ):
                raise SystemExit(f"{args.out} holds another job's runs")
            records = recorded["runs"]
        first = 1 + max((r["pair"] for r in records), default=-1)
        result: dict[str, Any] = {}
        for pair in range(first, first + args.pairs):
            order = args.systems[pair % len(args.systems) :] + args.systems[: pair % len(args.systems)]
            for system in order:
                record = run_one(system, work, job_file, args.pfl_python, f"{system}-{pair}", args.clients, args.method)
                record["pair"] = pair
                records.append(record)
                med = record["round_seconds_median"]
                print(
                    f"pair {pair} {system}: exit {record['exit_code']}, whole {record['whole_seconds']:.1f} s, "
                    f"round median {med if med is None else round(med, 2)} s, final {record['final_accuracy']}, "
                    f"load {record['load_before']} -> {record['load_after']}",
                    flush=True,
                )
                result = {
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}",
                    "pairs": 1 + max(r["pair"] for r in records),
                    "clients": args.clients,
                    "method": args.method,
                    "job": job_for(args.clients, args.method),
                    "job_text": format_overrides(job_for(args.clients, args.method)),
                    "pfl_version": next((r["pfl_version"] for r in records if r.get("pfl_version")), None),
                    "export": export_info,
                    "summary": summarise_pairs(records, export_info),
                    "runs": records,
                }
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json_lines(result))  # after every run: a stop keeps what ran
                args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0
