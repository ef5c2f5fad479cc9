"""The default run (``make run``: 10 clients) of two checkouts side by side: wall time, peak memory, accuracy.

    python -m benchmarks.compare_default --before /path/to/old/checkout [--cycles 2] [--cached-only]
        [--run-config "num-server-rounds=5"]

Each cycle runs both checkouts first with empty caches (pretraining, features and, where the checkout has one, the
shared data cache: the first run) and then again with the caches the first run filled (the cached run); the order of
the two checkouts alternates from cycle to cycle, so that a drift in the machine's load does not favour either. Both
are measured by the same harness (``benchmarks/simulation_runs.py``: every process of the run, memory summed as PSS).
Spans are written (``FEDFT_PROFILE_DIR``) for both; a checkout without the profiler ignores it, and for one with it
the run's phases are stored too (``benchmarks/run_phases.py``). Results go to ``--out`` after every run; the medians
are printed as a Markdown table. ``--cached-only`` skips the first runs and uses the caches the configuration names
(by default the user's, filled by earlier runs), for a machine too busy for both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import RESULTS_DIR
from benchmarks.run_phases import profile
from benchmarks.simulation_runs import cache_overrides, run_simulation_measured
from profiling.spans import LAUNCH, PROFILE_DIR_ENV, read_spans
from run_config.text import parse_overrides
from simulation.local_run import PROJECT_DIR


def measure(
    label: str, checkout: Path, caches: Path | None, cached: bool, work: Path, run_config: dict[str, object]
) -> dict[str, Any]:
    """One default run of ``checkout`` with its caches in ``caches`` (filled by an earlier run when ``cached``; None:
    the configuration's own caches)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=work))
    (folder / "spans").mkdir()
    launched = time.time()
    run = run_simulation_measured(
        {**(cache_overrides(checkout, caches) if caches else {}), **run_config},
        num_supernodes=10,
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


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument("--after", type=Path, default=PROJECT_DIR)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--run-config", default="", help="overrides for both, as for python -m simulation")
    parser.add_argument("--cached-only", action="store_true", help="only cached runs, with the configured caches")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "compare_default.json")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedft-compare-"))
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    run_config = parse_overrides(args.run_config)
    runs: list[dict[str, Any]] = []
    for cycle in range(args.cycles):
        order = ["before", "after"] if cycle % 2 == 0 else ["after", "before"]
        caches = {label: None if args.cached_only else work / f"caches-{label}-{cycle}" for label in order}
        for cached in (True,) if args.cached_only else (False, True):
            for label in order:
                run = measure(label, checkouts[label], caches[label], cached, work, run_config)
                runs.append({"cycle": cycle, **run})
                print(
                    f"cycle {cycle} {label} {'cached' if cached else 'first'}: exit {run['exit_code']}, "
                    f"{run['wall_seconds']:.1f} s, {run['peak_pss_gib']:.2f} GiB PSS, final {run['final_accuracy']}",
                    flush=True,
                )
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(
                    json.dumps(
                        {
                            "checkouts": {k: str(v) for k, v in checkouts.items()},
                            "run_config": args.run_config,
                            "runs": runs,
                        },
                        indent=1,
                    )
                    + "\n"
                )
    print("\n".join(medians(runs)))
    return runs


if __name__ == "__main__":
    main()
