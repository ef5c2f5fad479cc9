"""Hostile clients against every ``aggregation`` rule, and what the default defence costs honest runs.

    python -m benchmarks attacks [--rounds 5] [--local-epochs 1] [--cost-seeds 0 1 2] [--part all]

Part ``attacks``: one client (partition 0) of 8 and of 10 runs each ``fail-partitions`` attack (``scale100``,
``signflip10``, ``huge``, ``inflate``, ``gaussian``, ``labelflip``) every round, for FedAvg and FedFT-EDS under
every rule, next to the honest run; Dir(0.1), seed 0. Part ``cost``: honest runs with ``mean`` and the default
``clipped-mean`` at Dir(0.1) and Dir(0.5) over ``--cost-seeds`` (10 clients). All runs use LeNet-5 on the
embedded fashion-mnist-mini set, the app's defaults otherwise, and the real ServerApp and ClientApps in one
process (the in-process engine, ``simulation/in_process.py``: no Ray), one torch thread. Runs of one seed share one
pretrained checkpoint (the cache is keyed by the pretraining recipe and seed, which every method and rule here
shares).

Writes ``measurements/benchmarks/attacks.json`` (every run: accuracies per round and the rule's per-round report)
and ``measurements/benchmarks/attacks_table.md`` (final and best accuracy against the honest run).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import RESULTS_DIR, command_line, json_lines
from run_config.choices import AGGREGATION_RULES
from run_config.defaults import load_defaults
from run_config.fail_partitions import ATTACK_MODES
from simulation.in_process import run_in_process

NAME = "attacks"
RESULTS = RESULTS_DIR / "attacks.json"
METHODS = ("fedavg", "fedft-eds")
ATTACKER = 0
HONEST = "honest"


def run_config(
    work: Path,
    name: str,
    *,
    method: str,
    rule: str,
    attack: str,
    alpha: float,
    seed: int,
    rounds: int,
    local_epochs: int,
    clip: float | None = None,
    cap: float | None = None,
) -> dict[str, Any]:
    """The app's defaults with LeNet-5 on fashion-mnist-mini and the benchmark's choices (``clip`` and ``cap``
    override ``clip-multiple`` and ``weight-cap-multiple`` when given)."""
    config = load_defaults()
    config.update(
        {
            "clip-multiple": clip if clip is not None else config["clip-multiple"],
            "weight-cap-multiple": cap if cap is not None else config["weight-cap-multiple"],
            "method": method,
            "aggregation": rule,
            "dirichlet-alpha": alpha,
            "seed": seed,
            "model": "lenet5",
            "dataset": "fashion-mnist-mini",
            "num-server-rounds": rounds,
            "local-epochs": local_epochs,
            "fail-partitions": "" if attack == HONEST else f"{ATTACKER}:{attack}",
            "client-threads": 1,
            "results-dir": str(work / "results"),
            "run-name": name,
            "node-wait-seconds": 0.0,
            "pretrain-cache-dir": str(work / "pretrained"),
            "feature-cache-dir": str(work / "features"),
        }
    )
    return config


def run_once(work: Path, num_clients: int, **settings: Any) -> dict[str, Any]:
    """One in-process run; its accuracies per round and the aggregation rule's per-round report."""
    name = "-".join(str(v) for v in (*settings.values(), num_clients))
    config = run_config(work, name, **settings)
    tick = time.perf_counter()
    run_in_process(config, num_partitions=num_clients)
    seconds = time.perf_counter() - tick
    directory = work / "results" / name
    rounds = [json.loads(line) for line in (directory / "rounds.jsonl").read_text().splitlines()]
    summary = json.loads((directory / "summary.json").read_text())
    accuracy = [round(r["accuracy"], 4) for r in rounds]
    return {
        **{k: v for k, v in settings.items() if k not in ("rounds", "local_epochs", "clip", "cap")},
        "clients": num_clients,
        "clip_multiple": config["clip-multiple"],
        "weight_cap_multiple": config["weight-cap-multiple"],
        "initial_accuracy": round(summary["initial_accuracy"], 4),
        "final_accuracy": accuracy[-1],
        "best_accuracy": max(accuracy),
        "accuracy": accuracy,
        "reports": [report(r) for r in rounds],
        "seconds": round(seconds, 1),
    }


def report(record: dict[str, Any]) -> dict[str, Any]:
    """What the aggregation rule did in a round (from rounds.jsonl), norms to 4 significant digits."""
    kept: dict[str, Any] = {
        k: record[k] for k in ("aggregated", "clipped", "weight_capped", "selected", "rejected") if k in record
    }
    if "median_update_norm" in record:
        kept["median_update_norm"] = float(f"{record['median_update_norm']:.4g}")
    return kept


def attack_grid(work: Path, rounds: int, local_epochs: int) -> list[dict[str, Any]]:
    runs = []
    for method in METHODS:
        for num_clients in (8, 10):
            for rule in AGGREGATION_RULES:
                for attack in (HONEST, *ATTACK_MODES):
                    runs.append(
                        run_once(
                            work,
                            num_clients,
                            method=method,
                            rule=rule,
                            attack=attack,
                            alpha=0.1,
                            seed=0,
                            rounds=rounds,
                            local_epochs=local_epochs,
                        )
                    )
                    print(_line(runs[-1]), flush=True)
    return runs


def tuning_grid(work: Path, rounds: int, local_epochs: int, clips: list[float], caps: list[float]) -> list[dict]:
    """``clipped-mean`` with other multiples against the attacks its norm bound is meant for."""
    runs = []
    for method in METHODS:
        for num_clients in (8, 10):
            for clip in clips:
                for cap in caps:
                    for attack in (HONEST, "scale100", "signflip10", "huge", "inflate"):
                        runs.append(
                            run_once(
                                work,
                                num_clients,
                                method=method,
                                rule="clipped-mean",
                                attack=attack,
                                alpha=0.1,
                                seed=0,
                                rounds=rounds,
                                local_epochs=local_epochs,
                                clip=clip,
                                cap=cap,
                            )
                        )
                        print(_line(runs[-1]), f"clip {clip} cap {cap}", flush=True)
    return runs


def cost_grid(work: Path, rounds: int, local_epochs: int, seeds: list[int]) -> list[dict[str, Any]]:
    runs = []
    for alpha in (0.1, 0.5):
        for seed in seeds:
            for method in METHODS:
                for rule in ("mean", "clipped-mean"):
                    runs.append(
                        run_once(
                            work,
                            10,
                            method=method,
                            rule=rule,
                            attack=HONEST,
                            alpha=alpha,
                            seed=seed,
                            rounds=rounds,
                            local_epochs=local_epochs,
                        )
                    )
                    print(_line(runs[-1]), flush=True)
    return runs


def _line(run: dict[str, Any]) -> str:
    return (
        f"{run['method']:9} n={run['clients']:2} α={run['alpha']} seed={run['seed']} {run['rule']:12} "
        f"{run['attack']:10} final {run['final_accuracy']:.3f} best {run['best_accuracy']:.3f} "
        f"({run['seconds']} s)"
    )


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def attack_table(runs: list[dict[str, Any]]) -> str:
    """Final / best accuracy (%) per attack and rule; the honest row first; worst final drop last."""
    lines = []
    for method in METHODS:
        for num_clients in (8, 10):
            cell = {(r["rule"], r["attack"]): r for r in runs if r["method"] == method and r["clients"] == num_clients}
            if not cell:
                continue
            lines += [
                f"\n**{method}, 1 attacker of {num_clients}** (final / best accuracy, %)\n",
                "| attack | " + " | ".join(f"`{rule}`" for rule in AGGREGATION_RULES) + " |",
                "|---|" + "---|" * len(AGGREGATION_RULES),
            ]
            for attack in (HONEST, *ATTACK_MODES):
                values = [cell.get((rule, attack)) for rule in AGGREGATION_RULES]
                lines.append(
                    f"| {attack} | "
                    + " | ".join(
                        f"{_pct(v['final_accuracy'])} / {_pct(v['best_accuracy'])}" if v else "–" for v in values
                    )
                    + " |"
                )
            drops = []
            for rule in AGGREGATION_RULES:
                honest = cell.get((rule, HONEST))
                attacked = [cell[(rule, a)]["final_accuracy"] for a in ATTACK_MODES if (rule, a) in cell]
                drops.append(_pct(honest["final_accuracy"] - min(attacked)) if honest and attacked else "–")
            lines.append("| worst drop vs honest | " + " | ".join(drops) + " |")
    return "\n".join(lines)


def tuning_table(runs: list[dict[str, Any]]) -> str:
    """Per (clip-multiple, weight-cap-multiple): honest and worst attacked final accuracy per method and size."""
    if not runs:
        return ""
    final = {
        (r["method"], r["clients"], r["clip_multiple"], r["weight_cap_multiple"], r["attack"]): r["final_accuracy"]
        for r in runs
    }
    settings = sorted({(r["clip_multiple"], r["weight_cap_multiple"]) for r in runs})
    cases = sorted({(r["method"], r["clients"]) for r in runs})
    lines = [
        "| clip-multiple | weight-cap-multiple | "
        + " | ".join(f"{m}, n={n}: honest / worst" for m, n in cases)
        + " | largest drop |",
        "|---|---|" + "---|" * (len(cases) + 1),
    ]
    for clip, cap in settings:
        cells, drops = [], []
        for method, n in cases:
            honest = final.get((method, n, clip, cap, HONEST))
            attacked = [
                v for (m, k, c, w, a), v in final.items() if (m, k, c, w) == (method, n, clip, cap) and a != HONEST
            ]
            if honest is None or not attacked:
                cells.append("–")
                continue
            cells.append(f"{_pct(honest)} / {_pct(min(attacked))}")
            drops.append(honest - min(attacked))
        lines.append(f"| {clip} | {cap} | " + " | ".join(cells) + f" | {_pct(max(drops)) if drops else '–'} |")
    return "\n".join(lines)


def cost_table(runs: list[dict[str, Any]]) -> str:
    """Honest runs: mean and clipped-mean, final and best accuracy over seeds, and the paired difference."""
    if not runs:
        return ""
    header = (
        "| α | method | seeds | `mean` final | `clipped-mean` final | Δ final (paired) | `mean` best | "
        "`clipped-mean` best | Δ best (paired) | honest updates clipped |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for alpha in sorted({r["alpha"] for r in runs}):
        for method in METHODS:
            pairs: dict[int, dict[str, dict[str, Any]]] = {}
            for r in runs:
                if r["alpha"] == alpha and r["method"] == method:
                    pairs.setdefault(r["seed"], {})[r["rule"]] = r
            pairs = {s: p for s, p in pairs.items() if {"mean", "clipped-mean"} <= set(p)}
            if not pairs:
                continue
            stats = []
            for key in ("final_accuracy", "best_accuracy"):
                plain = [p["mean"][key] for p in pairs.values()]
                clipped = [p["clipped-mean"][key] for p in pairs.values()]
                diffs = [c - m for c, m in zip(clipped, plain)]
                stats += [_mean_std(plain), _mean_std(clipped), _mean_std(diffs, signed=True)]
            reports = [rep for p in pairs.values() for rep in p["clipped-mean"]["reports"] if "clipped" in rep]
            clipped_share = sum(len(rep["clipped"]) for rep in reports) / max(1, 10 * len(reports))
            lines.append(
                f"| {alpha} | {method} | {len(pairs)} | " + " | ".join(stats) + f" | {100 * clipped_share:.0f}% |"
            )
    return "\n".join(lines)


def worst_drops(runs: list[dict[str, Any]]) -> str:
    """Per method and population, each rule's worst drop in final accuracy under any attack against its honest run
    (points), as a Markdown table."""
    lines = [
        "| method, clients | " + " | ".join(f"`{rule}`" for rule in AGGREGATION_RULES) + " |",
        "|---|" + "---|" * len(AGGREGATION_RULES),
    ]
    for method in METHODS:
        for num_clients in (8, 10):
            cell = {(r["rule"], r["attack"]): r for r in runs if r["method"] == method and r["clients"] == num_clients}
            drops = []
            for rule in AGGREGATION_RULES:
                honest = cell.get((rule, HONEST))
                attacked = [cell[(rule, a)]["final_accuracy"] for a in ATTACK_MODES if (rule, a) in cell]
                drops.append(_pct(honest["final_accuracy"] - min(attacked)) if honest and attacked else "–")
            lines.append(f"| {method}, 1 attacker of {num_clients} | " + " | ".join(drops) + " |")
    return "\n".join(lines)


def recorded_figure() -> str:
    recorded = json.loads(RESULTS.read_text())
    return (
        "Worst drop in final accuracy (points) under any of the attacks, against the same rule's honest run:\n\n"
        + worst_drops(recorded["attacks"])
        + "\n\nWhat the default (`clipped-mean`) costs honest runs against `mean` (accuracy in %, mean ± sd over "
        + "seeds):\n\n"
        + cost_table(recorded["cost"])
    )


def _mean_std(values: list[float], signed: bool = False) -> str:
    mean = 100 * statistics.fmean(values)
    std = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:+.1f} ± {std:.1f}" if signed else f"{mean:.1f} ± {std:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--cost-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--part", choices=("attacks", "tune", "cost", "all"), default="all")
    parser.add_argument("--clips", type=float, nargs="+", default=[1.0, 1.5, 2.0], help="tune: clip-multiple values")
    parser.add_argument("--caps", type=float, nargs="+", default=[1.0, 2.0], help="tune: weight-cap-multiple values")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--work-dir", type=Path, default=None, help="keeps run folders and caches (default: temporary)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="attacks-"))
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    result = {
        "command": " ".join([f"python -m benchmarks {NAME}", *(sys.argv[1:] if argv is None else argv)]),
        "setup": {
            "model": "lenet5",
            "dataset": "fashion-mnist-mini",
            "rounds": args.rounds,
            "local_epochs": args.local_epochs,
            "attacker_partition": ATTACKER,
            "threads": 1,
        },
        **{part: previous.get(part, []) for part in ("attacks", "tune", "cost")},
    }
    tick = time.perf_counter()
    if args.part in ("attacks", "all"):
        result["attacks"] = attack_grid(work, args.rounds, args.local_epochs)
    if args.part in ("tune", "all"):
        result["tune"] = tuning_grid(work, args.rounds, args.local_epochs, args.clips, args.caps)
    if args.part in ("cost", "all"):
        result["cost"] = cost_grid(work, args.rounds, args.local_epochs, args.cost_seeds)
    result["seconds"] = round(time.perf_counter() - tick)
    args.out.write_text(json_lines(result))
    table = "\n\n".join(
        filter(None, [attack_table(result["attacks"]), tuning_table(result["tune"]), cost_table(result["cost"])])
    )
    args.out.with_name("attacks_table.md").write_text(table + "\n")
    print(table)
    return 0
