"""Where a simulation's wall time goes: start-up, pretraining, and each round's sampling, message encoding and
transfer, client data loading and compute, aggregation, evaluation, result writing and checkpoint.

    python -m benchmarks.profile_run [--label default] [--num-supernodes 10] [--run-config "..."] [--cold]

Runs ``python -m simulation`` with ``FEDFT_PROFILE_DIR`` set, so that the launcher, the ServerApp and every ClientApp
write the spans of their phases (``profiling/spans.py``), and splits the run's wall time into phases that add up to
it (``benchmarks/run_phases.py``). Features are cached in a fresh folder (the first round builds them); ``--cold``
also pretrains from scratch. Adds the profile under ``--label`` to ``measurements/benchmarks/profile.json`` and
prints it as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import RESULTS_DIR
from benchmarks.run_phases import Profile, profile
from benchmarks.simulation_runs import run_simulation_measured
from profiling.spans import CLIENT_COMPUTE, LAUNCH, PROFILE_DIR_ENV, read_spans
from run_config.text import parse_overrides


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
    ordered = sorted(values)
    if not ordered:
        return 0.0
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="default", help="name of this profile in the output file")
    parser.add_argument("--num-supernodes", type=int, default=10)
    parser.add_argument("--cpus-per-client", type=int, default=1)
    parser.add_argument("--run-config", default="", help="overrides, as for python -m simulation")
    parser.add_argument("--cold", action="store_true", help="pretrain from scratch (an empty pretraining cache)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "profile.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fedft-profile-") as tmp:
        work = Path(tmp)
        (work / "spans").mkdir()
        overrides = {"feature-cache-dir": str(work / "features"), **parse_overrides(args.run_config)}
        if args.cold:
            overrides["pretrain-cache-dir"] = str(work / "pretrained")
        launched = time.time()
        run = run_simulation_measured(
            overrides,
            num_supernodes=args.num_supernodes,
            results_dir=work / "results",
            log_file=work / "run.log",
            cpus_per_client=args.cpus_per_client,
            env={PROFILE_DIR_ENV: str(work / "spans")},
        )
        if run.exit_code:
            print((work / "run.log").read_text(errors="replace")[-3000:])
            raise SystemExit(f"the profiled run failed with exit code {run.exit_code}")
        spans = read_spans(work / "spans")  # with the launcher's whole life, its interpreter's start included:
        result = profile([{"name": LAUNCH, "start": launched, "end": launched + run.wall_seconds}, *spans])
    report = {
        "num_supernodes": args.num_supernodes,
        "cpus_per_client": args.cpus_per_client,
        "run_config": args.run_config,
        "cold": args.cold,
        "wall_seconds": run.wall_seconds,
        "peak_rss_gib": run.peak_rss_gib,
        "peak_pss_gib": run.peak_pss_gib,
        "peak_pss_by_kind_mib": run.peak_pss_by_kind_mib,
        "best_accuracy": run.summary.get("best_accuracy"),
        "final_accuracy": run.summary.get("final_accuracy"),
        "profile": result.as_json(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stored = json.loads(args.out.read_text()) if args.out.exists() else {}
    stored[args.label] = report
    args.out.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"{args.label}: {args.num_supernodes} clients, {run.wall_seconds:.1f} s, peak {run.peak_pss_gib:.2f} GiB PSS")
    print("peak PSS by process kind (MiB): " + ", ".join(f"{k} {v:.0f}" for k, v in run.peak_pss_by_kind_mib.items()))
    print("\n".join(phase_table(result)))
    return report


if __name__ == "__main__":
    main()
