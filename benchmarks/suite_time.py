"""The test suite's time on a fresh clone, as CI runs it: ``make test`` with its install, on this machine.

    python -m benchmarks suite-time [--slowest N] [--slower R]

Clones this checkout's HEAD into a temporary folder (committed work only, as CI's clean clone of main), then runs
``make setup`` and ``make test`` there one after the other, timing each, with pytest's ``--durations=N`` added
through ``PYTEST_ADDOPTS``. The install reads pip's cache as this machine holds it (CI's fresh machine downloads the
wheels as well). Appends a row to ``measurements/benchmarks/suite_time.json``: the commit, the CPU (its name, family
and model, and torch's kernel level: the 2-core machines this project is given are of several kinds), the 1-minute
load at the start and the highest sampled, the exit codes, the seconds of the install and of the tests, pytest's own
count line and its slowest tests. Stopped (SIGTERM, ^C), it stops the install or the tests it started, with their
processes, and removes the clone. Other work on the machine slows the suite as much as it slows that work: only a
row whose load stayed near 2 (the suite's own two workers) is a timing. Exits 1 when the install or the tests
failed. docs/benchmarks.md shows every row and the slowest tests of the latest run of each machine kind.

``--slower R`` runs the install and the tests beside one busy process per CPU, each pinned to its CPU at a nice value
chosen so that a thread of theirs gets 1/R of a core (R from 1.1 to 2, to the nearest the kernel's nice weights
allow: 2, 1.8, 1.64, 1.51, 1.41, ...; Linux, root, for the CPU cgroup that they and the busy processes share): an
emulation of a CPU R times slower, not a timing of one, and an undercount (two threads of the suite sharing a core
with a busy process are slowed less than R). Ray's workers start at nice 0 there, not Ray's 15. The row
records R and the slowdown the same load gave a probe just before (torch's training steps and a Python loop, each on
one thread, three runs beside the load against three alone). docs/development.md ("Tests") says which R stands for
which of the 2-core machines, and from what measurements.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict

import torch

from benchmarks import PROJECT_DIR, RESULTS_DIR, LoadWatch, command_line, commit_of
from benchmarks.cpu_share import CompetingLoad, Slowdown, competing_nice, measured_slowdown, slowdown
from simulation.local_run import exit_on_sigterm, stop_marked, stop_process_tree

NAME = "suite-time"
OUTPUT = RESULTS_DIR / "suite_time.json"
#: The target for the whole of ``make test`` with its install on the 2-core machine (docs/development.md, "Tests").
TARGET_SECONDS = 480
#: The highest 1-minute load of a run that had the 2-core machine to itself: the suite's two workers, mypy and the
#: processes its deployment tests start reached 3.3 with nothing else running (7f989e3, 29 Nov 2026), a run beside an
#: experiment 6.5; above this, other work shared the cores and the row times that work as much as the suite. An
#: emulation's row (``--slower``) is judged by its highest load less its busy processes (one per CPU).
QUIET_LOAD = 4.0
#: The environment of commands run beside a ``CompetingLoad``: Ray starts its workers at nice 15 (its
#: ``worker_niceness``), where beside a busy process at nice 1 they would get 4% of a core (36 / (36 + 820)) rather
#: than 1/1.8 of it, and the documented ``flwr run`` test would never end; at nice 0 they are slowed like the rest.
EMULATION_ENV = {"RAY_worker_niceness": "0"}
#: The variable whose value (one per run) marks every process the timed commands start, to be found by when stopped.
SUITE_MARKER = "FEDFT_SUITE_TIME_ID"
#: pytest's last line under ``-q``: its counts and its own wall time.
PYTEST_LINE = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in ([\d.]+)s\b", re.MULTILINE)
#: One line of ``--durations``: seconds, phase, test id.
DURATION_LINE = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S.*?)\s*$", re.MULTILINE)


class SuiteRun(TypedDict):
    """One timed ``make setup`` + ``make test`` on a fresh clone."""

    date: str
    commit: str
    machine: str  # torch's CPU kernel level: AVX2, AVX512, ...
    cpu: str
    install_exit_code: int | None
    install_seconds: float | None
    test_exit_code: int
    test_seconds: float  # ``make test`` after the install: ruff, lint-imports, pytest with mypy beside it
    total_seconds: float
    pytest_line: str
    load_at_start: NotRequired[float]
    load_max: NotRequired[float]
    slowest: NotRequired[list[tuple[float, str]]]
    slower: NotRequired[float]  # set on an emulation (``--slower``): how many times slower a core was for the suite
    competing_nice: NotRequired[int]  # the nice value of the busy processes beside it
    busy_processes: NotRequired[int]  # how many (one per CPU); they count in the load
    measured: NotRequired[Slowdown]  # the slowdown the same load gave ``PROBE``, measured just before
    log_tail: NotRequired[str]
    how: NotRequired[str]  # set on rows not timed by this benchmark


def cpu_description(cpuinfo: str) -> str:
    """The CPU's name, family and model, from the text of /proc/cpuinfo (``AMD EPYC 9B45 (family 26, model 2)``)."""
    fields = dict(re.findall(r"^(model name|cpu family|model)\s*:\s*(.+)$", cpuinfo, re.MULTILINE))
    name = fields.get("model name", "unknown CPU").strip()
    if "cpu family" not in fields:
        return name
    return f"{name} (family {fields['cpu family'].strip()}, model {fields.get('model', '?').strip()})"


def kernel_level() -> str:
    """torch's CPU kernel level on this machine (``AVX2``, ``AVX512``, ...)."""
    return str(torch.backends.cpu.get_cpu_capability())


def pytest_summary(log: str) -> tuple[str, list[tuple[float, str]]]:
    """pytest's count line (``"1974 passed, 19 skipped in 234.1s"``; empty when it printed none) and its slowest
    tests' (seconds, phase and id), from ``make test``'s output."""
    counts = list(PYTEST_LINE.finditer(log))
    line = f"{counts[-1].group(1).rstrip(', ')} in {counts[-1].group(2)}s" if counts else ""
    slowest = [(float(seconds), f"{phase} {test}") for seconds, phase, test in DURATION_LINE.findall(log)]
    return line, slowest


def _timed(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], load: CompetingLoad | None
) -> tuple[int, float, str]:
    """Run ``command``, returning its exit code, seconds and output. Stopped when this process is (SIGTERM, ^C), by
    PID: the command and its descendants, then every process that inherited ``env``'s ``SUITE_MARKER`` (SuperLinks
    and SuperNodes the tests start in sessions of their own, which init adopts), so that a stopped benchmark leaves
    none of the suite's processes running."""
    tick = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=load.enter if load else None,
    )
    try:
        output, _ = process.communicate()
    except BaseException:
        stop_process_tree(process)
        stop_marked(env[SUITE_MARKER], variable=SUITE_MARKER)
        raise
    return process.returncode, time.perf_counter() - tick, output


def time_suite(slowest: int, load: CompetingLoad | None = None) -> SuiteRun:
    """Clone HEAD, then time ``make setup`` and ``make test`` in the clone (both beside ``load`` when given, which is
    closed once they have run)."""
    env = {
        **os.environ,
        "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --durations={slowest}".strip(),
        SUITE_MARKER: uuid.uuid4().hex,
    }
    if load:
        env.update(EMULATION_ENV)
    with tempfile.TemporaryDirectory(prefix="fedft-suite-time-") as scratch, LoadWatch() as watch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(PROJECT_DIR), str(clone)], check=True)
        install_code, install_seconds, install_log = _timed(["make", "setup"], clone, env, load)
        tested = (1, 0.0, "") if install_code else _timed(["make", "test"], clone, env, load)
        test_code, test_seconds, test_log = tested
        commit = commit_of(clone)
        if load:  # before the clone's removal, which the busy processes would slow for minutes
            load.close()
    line, durations = pytest_summary(test_log)
    failed = install_code or test_code
    run = SuiteRun(
        date=time.strftime("%Y-%m-%d %H:%M"),
        commit=commit,
        machine=kernel_level(),
        cpu=cpu_description(Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""),
        install_exit_code=install_code,
        install_seconds=round(install_seconds, 1),
        test_exit_code=test_code,
        test_seconds=round(test_seconds, 1),
        total_seconds=round(install_seconds + test_seconds, 1),
        pytest_line=line,
        load_at_start=round(watch.at_start, 2),
        load_max=round(watch.highest, 2),
        slowest=durations,
        log_tail=(install_log + test_log)[-3000:] if failed else "",
    )
    if load:
        run["slower"], run["competing_nice"], run["busy_processes"] = slowdown(load.nice), load.nice, len(load.busy)
    return run


def _seconds(value: object) -> str:
    return f"{value:.0f} s" if isinstance(value, (int, float)) else "–"


def _kind(run: Mapping[str, object]) -> str:
    """The machine a row ran on, as emulated (``..., AVX512 made 1.8x slower``)."""
    slower = f" made {run['slower']:g}x slower" if isinstance(run.get("slower"), (int, float)) else ""
    return f"{run['cpu']}, {run['machine']}{slower}"


def _machine_text(run: Mapping[str, object]) -> str:
    """``_kind`` with an emulation's measured slowdown (``... made 1.8x slower (measured: torch 2.1x, Python
    1.75x)``)."""
    measured = run.get("measured")
    if isinstance(measured, dict):
        return f"{_kind(run)} (measured: torch {measured['torch']:g}x, Python {measured['python']:g}x)"
    return _kind(run)


def _row_text(run: Mapping[str, object], note: int | None = None) -> str:
    total, highest_load = run["total_seconds"], run.get("load_max")
    busy = run.get("busy_processes", 0)
    busy = busy if isinstance(busy, int) else 0
    failed = run.get("install_exit_code") or run["test_exit_code"]
    if failed:
        verdict = "failed"
    elif isinstance(highest_load, (int, float)) and highest_load - busy > QUIET_LOAD:
        verdict = "not a timing (load)"
    else:
        verdict = "yes" if isinstance(total, (int, float)) and total <= TARGET_SECONDS else "no"
    load = f"{run['load_at_start']} / {run['load_max']}" if "load_max" in run else "–"
    marked = f" (note {note})" if note else ""
    return (
        f"| {run['commit']} | {run['date']}{marked} | {_machine_text(run)} | {_seconds(total)} | {verdict} "
        f"| {_seconds(run.get('install_seconds'))} | {_seconds(run['test_seconds'])} | {run['pytest_line'] or '–'} "
        f"| {load} |"
    )


def recorded_figure(slowest_shown: int = 10) -> str:
    """Every recorded run, oldest first (a row not timed by this benchmark points to a note saying how it was), and
    the slowest tests of each machine kind's latest run that recorded them."""
    runs: list[SuiteRun] = json.loads(OUTPUT.read_text())
    notes = list(dict.fromkeys(run["how"] for run in runs if "how" in run))
    lines = [
        f"| commit | date | machine | `make test` in all | within {TARGET_SECONDS // 60} min | of it, the install "
        "| of it, the tests | pytest | load at start / highest |",
        "|---|---|---|---|---|---|---|---|---|",
        *(_row_text(run, notes.index(run["how"]) + 1 if "how" in run else None) for run in runs),
    ]
    if notes:
        lines += ["", *(f"Note {number}: {text}." for number, text in enumerate(notes, 1))]
    latest = {_kind(run): run for run in runs if run.get("slowest")}
    for machine, run in latest.items():
        lines += ["", f"Slowest tests of the latest run on {machine} ({run['commit']}, {run['date']}):", ""]
        lines += [f"- {seconds:.1f} s {test}" for seconds, test in run["slowest"][:slowest_shown]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--slowest", type=int, default=25, help="how many of the slowest tests to record")
    parser.add_argument("--slower", type=float, default=None, help="emulate a CPU this many times slower (1.1 to 2)")
    args = parser.parse_args(argv)
    if args.slowest < 1:
        parser.error("--slowest must be at least 1")
    if args.slower is not None and not 1.1 <= args.slower <= 2:
        parser.error("--slower must be between 1.1 and 2")
    exit_on_sigterm()  # SIGTERM unwinds: the command's processes, the load and the clone are stopped and removed
    measured: Slowdown | None = None
    load: CompetingLoad | None = None
    if args.slower is not None:
        nice = competing_nice(args.slower)
        try:
            measured, load = measured_slowdown(nice), CompetingLoad(nice)
        except OSError as error:
            parser.error(f"--slower needs a cgroup this process may create (Linux, root): {error}")
    try:
        run = time_suite(args.slowest, load)
    finally:
        if load:
            load.close()
    if measured:
        run["measured"] = measured
    runs = json.loads(OUTPUT.read_text()) if OUTPUT.is_file() else []
    OUTPUT.write_text(json.dumps([*runs, run], indent=1) + "\n")
    print(_row_text(run))
    return 1 if run["install_exit_code"] or run["test_exit_code"] else 0
