"""The least memory a whole simulation needs: the run inside a memory cgroup with a hard limit, the limit bisected.

    python -m benchmarks memory-limit --case scale10|default-cached|default-first [--checkout DIR]
        [--low 1] [--high 8] [--step 0.125]

Needs root and a cgroup memory controller; CI has neither, so this is a benchmark, not a test.

Why: the other benchmarks report the peak PSS of a run's processes, which counts every page they map, clean
file-backed pages included: the memory-mapped dataset and feature files, the libraries' code. The kernel can drop
those and read them again, so the memory a machine (or a container's limit) must have for the run can be less. That
is what this measures. Each run starts inside a fresh memory cgroup whose hard limit is L, page cache included, with
no swap, so anonymous memory cannot be paged out. Above L, the kernel reclaims the cgroup's page cache, and kills
one of its processes when that is not enough.

A run passes at L when it exits 0 and every round's accuracy and cohort equal those of a reference run without a
limit. It must also finish within ``--slowdown`` times the reference's wall time: a run that pages its files in and
out for ever is not a run that fits. The page cache is dropped before every run, so that the files a run reads are
charged to its own cgroup, not to whoever read them first (it is the whole machine's page cache: other benchmarks
running meanwhile are disturbed).

The cases:

- ``scale10``: the first scale runs' 10-client case (``scale10_memory.json``: WRN-16-1 FedFT-EDS from
  random weights, full Fashion-MNIST, Dir(0.5)), every run with empty caches of its own;
- ``default-cached``: the default run (``make run``) with the caches (pretrained weights, features, decoded arrays)
  that the reference run filled;
- ``default-first``: the default run with empty caches of its own (it pretrains while the clients start).

The limit is bisected on a grid from ``--low`` to ``--high`` GiB in steps of ``--step``, on the assumption that a run
that passes at L also passes at any larger limit; every run is kept in ``--out``.

The cgroup (``benchmarks.cgroup.MemoryCgroup``, Linux, root) is made inside this process's own, so that the limits of
whatever contains this process still hold; swap is limited to nothing where the kernel accounts for it, so anonymous
memory cannot be paged out instead. Measured with the cgroup-v1 memory controller (``/sys/fs/cgroup/memory``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import PROJECT_DIR, RESULTS_DIR, command_line, commit_of
from benchmarks.cgroup import MemoryCgroup
from benchmarks.measured_run import cache_overrides, run_simulation_measured
from benchmarks.scale import SCALE_WORKLOAD
from run_config.text import parse_overrides

NAME = "memory-limit"
RESULTS = RESULTS_DIR / "memory_limit.json"
GIB = 2**30


def drop_page_cache() -> None:
    """Write dirty pages and drop the clean page cache, so that the files the next run reads are charged to its own
    cgroup and not to whoever read them before."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1")


#: Case name -> (run-config overrides, whether the runs share the reference run's caches).
CASES: dict[str, tuple[str, bool]] = {
    "scale10": (f"{SCALE_WORKLOAD} fraction-train=1.0 num-server-rounds=3 node-wait-seconds=900.0", False),
    "default-cached": ("", True),
    "default-first": ("", False),
}


def smallest_passing(passes: Callable[[float], bool], low: float, high: float, step: float) -> float | None:
    """The smallest limit on the grid ``low``, ``low + step``, ... ``high`` at which ``passes``, by bisection, assuming
    a limit that passes is followed by passing ones; None when even ``high`` fails. ``passes`` is called once per
    probed limit, ``high`` first."""
    steps = round((high - low) / step)
    if steps < 0 or abs(low + steps * step - high) > 1e-9:
        raise ValueError(f"the grid from {low} to {high} GiB must be whole steps of {step} GiB")
    grid = [low + i * step for i in range(steps + 1)]
    if not passes(grid[-1]):
        return None
    failing, passing = -1, len(grid) - 1  # indices: the largest known to fail, the smallest known to pass
    while passing - failing > 1:
        middle = (failing + passing) // 2
        if passes(grid[middle]):
            passing = middle
        else:
            failing = middle
    return grid[passing]


def outcome(rounds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a run's results must match to count as the same run: per round its accuracy and cohort."""
    return [(r.get("accuracy"), sorted(r.get("clients", []))) for r in rounds]


@dataclass
class LimitedRun:
    """One run under a limit (None: the unlimited reference)."""

    limit_gib: float | None
    exit_code: int
    wall_seconds: float
    peak_charged_gib: float
    peak_pss_gib: float
    oom_kills: int
    #: Exited 0 in time with the reference's results.
    passed: bool


def run_limited(
    checkout: Path,
    overrides: dict[str, object],
    limit_gib: float | None,
    work: Path,
    reference: LimitedRun | None,
    expected: list[tuple[Any, ...]] | None,
    slowdown: float,
) -> tuple[LimitedRun, list[tuple[Any, ...]]]:
    """Run ``checkout``'s simulation in a fresh cgroup limited to ``limit_gib``; judged against ``expected``."""
    folder = Path(tempfile.mkdtemp(prefix="limit-", dir=work))
    drop_page_cache()
    cgroup = MemoryCgroup(None if limit_gib is None else int(limit_gib * GIB))
    try:
        run = run_simulation_measured(
            overrides,
            num_supernodes=10,
            results_dir=folder / "results",
            log_file=folder / "run.log",
            project_dir=checkout,
            preexec_fn=cgroup.enter,
            timeout=None if reference is None else slowdown * reference.wall_seconds,
        )
        peak, kills = cgroup.peak_bytes(), cgroup.oom_kills()
    finally:
        cgroup.close()
    got = outcome(run.rounds)
    limited = LimitedRun(
        limit_gib=limit_gib,
        exit_code=run.exit_code,
        wall_seconds=run.wall_seconds,
        peak_charged_gib=peak / GIB,
        peak_pss_gib=run.peak_pss_gib,
        oom_kills=kills,
        passed=run.exit_code == 0 and bool(got) and (expected is None or got == expected),
    )
    return limited, got


def measure(
    case: str,
    checkout: Path,
    low: float,
    high: float,
    step: float,
    slowdown: float,
    extra: dict[str, object],
    save: Callable[[dict[str, Any]], None] = lambda result: None,
) -> dict[str, Any]:
    """The reference run and the bisection's runs of ``case`` for ``checkout``, and the smallest passing limit.
    ``save`` gets the result so far after every run (``smallest_passing_limit_gib`` None until the end), so that a
    bisection stopped half-way keeps what it measured."""
    text, shared_caches = CASES[case]
    work = Path(tempfile.mkdtemp(prefix="fedft-memory-limit-"))
    commit = commit_of(checkout)
    result: dict[str, Any] = {
        "case": case,
        "checkout": str(checkout),
        "commit": commit,
        "run_config": text,
        "grid_gib": [low, high, step],
        "slowdown": slowdown,
        "smallest_passing_limit_gib": None,
        "reference": None,
        "runs": [],
    }
    base = {**parse_overrides(text), **extra}

    def overrides(name: str) -> dict[str, object]:
        return {**base, **cache_overrides(checkout, work / ("caches" if shared_caches else f"caches-{name}"))}

    if shared_caches:  # fill the caches first, so that the reference is a cached run as well
        run_limited(checkout, overrides("fill"), None, work, None, None, slowdown)
    reference, expected = run_limited(checkout, overrides("reference"), None, work, None, None, slowdown)
    print(f"reference: {reference}", flush=True)
    result["reference"] = asdict(reference)
    save(result)
    if not reference.passed:
        raise SystemExit(f"the reference run failed (exit code {reference.exit_code}); see {work}")

    def passes(limit: float) -> bool:
        run, _ = run_limited(checkout, overrides(f"{limit:g}"), limit, work, reference, expected, slowdown)
        result["runs"].append(asdict(run))
        save(result)
        print(f"limit {limit:g} GiB: {run}", flush=True)
        return run.passed

    result["smallest_passing_limit_gib"] = smallest_passing(passes, low, high, step)
    result["load_average_after"] = os.getloadavg()
    save(result)
    for caches in work.glob("caches*"):  # gigabytes; the runs' logs and results stay, to look at
        shutil.rmtree(caches)
    print(f"the runs' logs: {work}", flush=True)
    return result


def figure(measurements: list[dict[str, Any]]) -> str:
    """Each measurement's least passing limit beside its reference run, as a Markdown table."""
    lines = [
        "| case | commit | least passing limit (GiB) | reference: peak PSS (GiB) | reference: peak charged (GiB) "
        "| reference: wall (s) | runs under a limit |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in measurements:
        reference, limit = m["reference"] or {}, m["smallest_passing_limit_gib"]
        lines.append(
            f"| {m['case']} | {m['commit']} | {'–' if limit is None else f'{limit:g}'} "
            f"| {reference.get('peak_pss_gib', 0):.2f} | {reference.get('peak_charged_gib', 0):.2f} "
            f"| {reference.get('wall_seconds', 0):.0f} | {len(m['runs'])} |"
        )
    return "\n".join(lines)


def recorded_figure() -> str:
    return figure(json.loads(RESULTS.read_text())["measurements"])


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--checkout", type=Path, default=PROJECT_DIR, help="the code to run (default: this one)")
    parser.add_argument("--low", type=float, default=1.0, help="GiB")
    parser.add_argument("--high", type=float, default=8.0, help="GiB")
    parser.add_argument("--step", type=float, default=0.125, help="GiB")
    parser.add_argument("--slowdown", type=float, default=1.5, help="a run slower than this × the reference fails")
    parser.add_argument("--run-config", default="", help="further overrides, as for python -m simulation")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    kept = json.loads(args.out.read_text())["measurements"] if args.out.exists() else []
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(result: dict[str, Any]) -> None:
        args.out.write_text(json.dumps({"measurements": [*kept, result]}, indent=1) + "\n")

    result = measure(
        args.case, args.checkout.resolve(), args.low, args.high, args.step, args.slowdown,
        parse_overrides(args.run_config), save,
    )  # fmt: skip
    print(
        f"{args.case} at {result['commit']}: smallest passing limit {result['smallest_passing_limit_gib']} GiB "
        f"(reference: peak PSS {result['reference']['peak_pss_gib']:.2f} GiB, "
        f"peak charged {result['reference']['peak_charged_gib']:.2f} GiB, {result['reference']['wall_seconds']:.0f} s)"
    )
    return 0
