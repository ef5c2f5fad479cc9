"""The default run (``make run``: 10 clients) measured: wall time, peak memory, accuracy and where the time went; beside
another checkout's with ``--before``.

    python -m benchmarks default-run [--cycles 1] [--before OTHER_CHECKOUT] [--cached-only]
        [--run-config "num-server-rounds=5"] [--num-supernodes 10] [--out FILE]

Each cycle runs this checkout (``--after``, labelled ``after``) and, given ``--before``, the other one (labelled
``before``), first with empty caches (pretraining, features and, where the checkout has one, the shared data cache:
the first run, pretraining included) and then again with the caches the first run filled (the cached run); the order
of the two checkouts alternates from cycle to cycle, so that a drift in the machine's load favours neither. Every run
is measured by ``benchmarks/measured_run.py`` (every process of the run, memory summed as PSS) with its spans written
(``FEDFT_PROFILE_DIR``; a checkout without the profiler ignores it), so that each run records where its time went.
``--cached-only`` skips the first runs and uses the caches the configuration names (by default the user's, filled by
earlier runs), for a machine too busy for both. Results go to ``--out`` (``measurements/benchmarks/default_run.json``)
after every run; printed at the end: the medians per checkout and cache state, and the phases of the last cached run
of ``after``.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import PROJECT_DIR, RESULTS_DIR, command_line
from benchmarks.measured_run import Profile, cache_overrides, profile, run_simulation_measured
from profiling.spans import CLIENT_COMPUTE, LAUNCH, PROFILE_DIR_ENV, read_spans
from run_config.text import parse_overrides

NAME = "default-run"
RESULTS = RESULTS_DIR / "default_run.json"


def measure(
    label: str,
    checkout: Path,
    caches: Path | None,
    cached: bool,
    work: Path,
    run_config: dict[str, object],
    num_supernodes: int,
) -> dict[str, Any]:
    """One default run of ``checkout`` with its caches in ``caches`` (filled by an earlier run when ``cached``; None:
    the configuration's own caches)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=work))
    (folder / "spans").mkdir()
    launched = time.time()
    run = run_simulation_measured(
        {**(cache_overrides(checkout, caches) if caches else {}), **run_config},
        num_supernodes=num_supernodes,
        results_dir=folder / "results",
        log_file=folder / "run.log",
        project_dir=checkout,
        env={PROFILE_DIR_ENV: str(folder / "spans")},
    )
    spans = read_spans(folder / "spans")
    phases = None
    if spans:
        phases = profile([{"name": LAUNCH, "start": launched, "end": launched + run.wall_seconds}, *spans]).as_json()
    return {
        "checkout": label,
        "cached": cached,
        "exit_code": run.exit_code,
        "wall_seconds": run.wall_seconds,
        "peak_pss_gib": run.peak_pss_gib,
        "peak_rss_gib": run.peak_rss_gib,
        "peak_pss_by_kind_mib": run.peak_pss_by_kind_mib,
        "best_accuracy": run.summary.get("best_accuracy"),
        "final_accuracy": run.summary.get("final_accuracy"),
        "round_seconds": run.round_seconds(),
        "load_average_before": os.getloadavg(),
        "phases": phases,
        "log": str(folder / "run.log"),
    }


def medians(runs: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: per checkout and cache state, the median wall time, peak PSS and final accuracy."""
    rows = [
        "| checkout | caches | runs | wall (s), median | peak PSS (GiB), median | final accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for cached in (False, True):
        for label in ("before", "after"):
            chosen = [r for r in runs if r["checkout"] == label and r["cached"] == cached and r["exit_code"] == 0]
            if not chosen:
                continue
            wall = statistics.median(r["wall_seconds"] for r in chosen)
            pss = statistics.median(r["peak_pss_gib"] for r in chosen)
            accuracy = ", ".join(f"{r['final_accuracy']:.4f}" for r in chosen if r["final_accuracy"] is not None)
            state = "filled (cached run)" if cached else "empty (first run)"
            rows.append(f"| {label} | {state} | {len(chosen)} | {wall:.1f} | {pss:.2f} | {accuracy} |")
    return rows


def phase_table(result: Profile) -> list[str]:
    """Markdown rows: each phase's seconds before round 1, in round 1, the median of the later rounds, after the last
    round, and over the whole run."""
    later = [r for r in result.rounds if r != min(result.rounds, default=0)]
    first = result.rounds.get(min(result.rounds, default=0), {})
    median = result.median_round(later)
    totals: dict[str, float] = {}
    for part in (result.start, result.end, *result.rounds.values()):
        for phase, seconds in part.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    header = (
        "| phase | before round 1 (s) | round 1 (s) | later rounds, median (s) | after the rounds (s) | whole run (s) |"
    )
    rows = [header, "|---|---|---|---|---|---|"]
    for phase in sorted(totals, key=lambda p: -totals[p]):
        cells = [result.start.get(phase, 0.0), first.get(phase, 0.0), median.get(phase, 0.0)]
        cells += [result.end.get(phase, 0.0), totals[phase]]
        rows.append(f"| {phase} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    later_totals = [result.round_seconds(r) for r in later]
    later_overheads = [result.overhead(r) for r in later]
    round_cells = [sum(result.start.values()), sum(first.values()), _median(later_totals), sum(result.end.values())]
    round_text = " | ".join(f"{c:.2f}" for c in round_cells)
    rows.append(f"| **all phases** | {round_text} | {result.phase_total():.2f} |")
    overhead_1 = sum(first.values()) - first.get(CLIENT_COMPUTE, 0.0)
    rows.append(f"| **outside client compute** | – | {overhead_1:.2f} | {_median(later_overheads):.2f} | – | – |")
    return rows


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def report(runs: list[dict[str, Any]]) -> str:
    """The medians, and the phases of the last cached run of ``after`` that has them."""
    lines = medians(runs)
    profiled = [r for r in runs if r["checkout"] == "after" and r["cached"] and r["exit_code"] == 0 and r["phases"]]
    if profiled:
        last = profiled[-1]
        lines += ["", f"Where the time of the last cached run of `after` went (cycle {last['cycle']}):", ""]
        lines += phase_table(Profile.from_json(last["phases"]))
    return "\n".join(lines)


def recorded_figure() -> str:
    return report(json.loads(RESULTS.read_text())["runs"])


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--before", type=Path, help="another checkout to run beside this one")
    parser.add_argument("--after", type=Path, default=PROJECT_DIR, help="the checkout measured (default: this one)")
    parser.add_argument("--cycles", type=int, default=1)
    parser.add_argument("--num-supernodes", type=int, default=10)
    parser.add_argument("--run-config", default="", help="overrides for every run, as for python -m simulation")
    parser.add_argument("--cached-only", action="store_true", help="only cached runs, with the configured caches")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedft-default-run-"))
    checkouts = {"after": args.after.resolve()}
    if args.before:
        checkouts["before"] = args.before.resolve()
    run_config = parse_overrides(args.run_config)
    runs: list[dict[str, Any]] = []
    for cycle in range(args.cycles):
        order = [
            label for label in (("before", "after") if cycle % 2 == 0 else ("after", "before")) if label in checkouts
        ]
        caches = {label: None if args.cached_only else work / f"caches-{label}-{cycle}" for label in order}
        for cached in (True,) if args.cached_only else (False, True):
            for label in order:
                run = measure(label, checkouts[label], caches[label], cached, work, run_config, args.num_supernodes)
                runs.append({"cycle": cycle, **run})
                print(
                    f"cycle {cycle} {label} {'cached' if cached else 'first'}: exit {run['exit_code']}, "
                    f"{run['wall_seconds']:.1f} s, {run['peak_pss_gib']:.2f} GiB PSS, final {run['final_accuracy']}",
                    flush=True,
                )
                recorded = {
                    "checkouts": {k: str(v) for k, v in checkouts.items()},
                    "run_config": args.run_config,
                    "runs": runs,
                }
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(recorded, indent=1) + "\n")
    print(report(runs))
    return 1 if any(r["exit_code"] for r in runs) else 0
