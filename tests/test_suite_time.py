"""benchmarks/suite_time.py: a fresh clone's install and tests timed apart, pytest's counts and slowest tests read
from its output, and the recorded rows rendered with the 8-minute verdict. The end-to-end test times a stand-in
project (a git repository whose Makefile prints what ``make test`` prints), not this suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import cpu_share, suite_time
from benchmarks.cpu_share import CompetingLoad
from simulation.local_run import start_times, still_running, stop_processes
from tests.test_cpu_share import competing_load_or_skip, probe_by_cgroup

MAKE_TEST_OUTPUT = """\
.venv/bin/ruff check .
All checks passed!
........................................................................ [100%]
============================= slowest 3 durations ==============================
86.20s call     tests/test_deployment.py::test_tls_authenticated_deployment_runs_fedft_eds_with_fedentopt
12.00s setup    tests/test_method_ports.py::test_the_cases_ran_with_pinned_numerics
3.10s call     tests/test_learning.py::test_the_method_learns[fedprox plus]
1974 passed, 19 skipped, 6 warnings in 234.56s (0:03:54)
.venv/bin/mypy:
Success: no issues found in 412 source files
"""


def test_pytest_summary_reads_the_count_line_and_the_slowest_tests() -> None:
    line, slowest = suite_time.pytest_summary(MAKE_TEST_OUTPUT)
    assert line == "1974 passed, 19 skipped, 6 warnings in 234.56s"
    assert slowest == [
        (86.2, "call tests/test_deployment.py::test_tls_authenticated_deployment_runs_fedft_eds_with_fedentopt"),
        (12.0, "setup tests/test_method_ports.py::test_the_cases_ran_with_pinned_numerics"),
        (3.1, "call tests/test_learning.py::test_the_method_learns[fedprox plus]"),
    ]


def test_output_without_a_pytest_run_gives_no_line_and_no_tests() -> None:
    assert suite_time.pytest_summary("make: *** [Makefile:63: test] Error 1\n") == ("", [])


def test_the_cpu_is_named_with_its_family() -> None:
    cpuinfo = "processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9B45\nflags\t\t: fpu\n"
    assert suite_time.cpu_description(cpuinfo) == "AMD EPYC 9B45 (family 26, model 2)"
    assert suite_time.cpu_description("") == "unknown CPU"


def recorded_run(commit: str, machine: str, total: float, **fields: object) -> dict[str, object]:
    return {
        "date": "2026-11-29 15:00",
        "commit": commit,
        "machine": machine,
        "cpu": "AMD EPYC",
        "install_exit_code": 0,
        "install_seconds": 40.0,
        "test_exit_code": 0,
        "test_seconds": total - 40.0,
        "total_seconds": total,
        "pytest_line": "10 passed in 1.0s",
        **fields,
    }


def test_the_figure_judges_each_row_against_8_minutes_and_lists_each_kinds_latest_slowest_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [
        recorded_run("aaa1111", "AVX2", 491.0, how="timed by hand"),
        recorded_run("bbb2222", "AVX2", 470.0, load_at_start=2.1, load_max=2.4, slowest=[[50.0, "call old"]]),
        recorded_run("ccc3333", "AVX2", 480.4, slowest=[[40.0, "call newer"], [30.0, "call next"]]),
        recorded_run("ddd4444", "AVX512", 250.0, test_exit_code=1, slowest=[[20.0, "call fast"]]),
        recorded_run("eee5555", "AVX512", 539.0, load_at_start=2.4, load_max=6.5),
        # emulations: the load less their 2 busy processes, 3.9, is within 4; 4.1 is not
        recorded_run(
            "fff6666", "AVX512", 442.0, slower=1.8, competing_nice=1, measured={"torch": 2.09, "python": 1.75},
            busy_processes=2, load_at_start=2.5, load_max=5.9, slowest=[[60.0, "call slowed"]],
        ),
        recorded_run("ggg7777", "AVX512", 450.0, slower=1.8, busy_processes=2, load_at_start=2.5, load_max=6.1),
    ]  # fmt: skip
    (tmp_path / "suite_time.json").write_text(json.dumps(runs))
    monkeypatch.setattr(suite_time, "OUTPUT", tmp_path / "suite_time.json")
    figure = suite_time.recorded_figure(slowest_shown=1)
    rows = [line for line in figure.splitlines() if line.startswith("| ") and "commit" not in line]
    verdicts = ["no", "yes", "no", "failed", "not a timing (load)", "yes", "not a timing (load)"]
    assert [row.split(" | ")[4] for row in rows] == verdicts
    assert rows[0].startswith("| aaa1111 | 2026-11-29 15:00 (note 1) | AMD EPYC, AVX2 | 491 s |")
    assert "| 2.1 / 2.4 |" in rows[1] and rows[0].endswith("| – |")
    assert "Note 1: timed by hand." in figure
    assert "on AMD EPYC, AVX2 (ccc3333" in figure and "- 40.0 s call newer" in figure
    assert "call next" not in figure and "call old" not in figure  # one shown; only the latest run of a kind
    assert "on AMD EPYC, AVX512 (ddd4444" in figure and "- 20.0 s call fast" in figure
    # an emulation is named as one, and its slowest tests are not taken for the machine's own
    slowed = "AMD EPYC, AVX512 made 1.8x slower (measured: torch 2.09x, Python 1.75x)"
    assert rows[5].startswith(f"| fff6666 | 2026-11-29 15:00 | {slowed} | 442 s |")
    assert "on AMD EPYC, AVX512 made 1.8x slower (fff6666" in figure and "- 60.0 s call slowed" in figure


@pytest.fixture(autouse=True)
def sigterm_handler_restored() -> Iterator[None]:
    """``main`` makes SIGTERM raise SystemExit in the process that calls it: this test worker's, put back after."""
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def stand_in_project(root: Path, test_exit: int, test_recipe: str = "") -> Path:
    """A git repository whose ``make setup`` and ``make test`` print what the real ones print, ``make test`` exiting
    with ``test_exit`` and echoing PYTEST_ADDOPTS and the cgroups it runs in (or running ``test_recipe``)."""
    root.mkdir()
    (root / "make-test-output.txt").write_text(MAKE_TEST_OUTPUT)
    recipe = test_recipe or (
        '@echo "addopts=$$PYTEST_ADDOPTS ray-niceness=$$RAY_worker_niceness"\n\t@cat /proc/self/cgroup\n'
        f"\t@cat make-test-output.txt\n\t@exit {test_exit}"
    )
    (root / "Makefile").write_text(f"setup:\n\t@echo installed\ntest:\n\t{recipe}\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *command], cwd=root, check=True, capture_output=True
        )
    return root


@pytest.mark.parametrize("test_exit", [0, 2])
def test_a_run_clones_times_both_steps_and_appends_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], test_exit: int
) -> None:
    project = stand_in_project(tmp_path / "project", test_exit)
    output = tmp_path / "suite_time.json"
    output.write_text(json.dumps([recorded_run("aaa1111", "AVX2", 491.0)]))
    monkeypatch.setattr(suite_time, "PROJECT_DIR", project)
    monkeypatch.setattr(suite_time, "OUTPUT", output)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert suite_time.main(["--slowest", "7"]) == (1 if test_exit else 0)
    first, run = json.loads(output.read_text())
    assert first["commit"] == "aaa1111"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=project, capture_output=True, text=True)
    assert run["commit"] == head.stdout.strip()
    assert (run["install_exit_code"], run["test_exit_code"]) == (0, test_exit)
    assert run["total_seconds"] == pytest.approx(run["install_seconds"] + run["test_seconds"], abs=0.11)
    assert run["pytest_line"] == "1974 passed, 19 skipped, 6 warnings in 234.56s"
    assert [seconds for seconds, _ in run["slowest"]] == [86.2, 12.0, 3.1]
    assert run["machine"] and run["cpu"] and run["load_max"] >= 0
    assert ("addopts=--durations=7" in run["log_tail"]) == bool(test_exit)  # the log is kept only for a failure
    assert run["commit"] in capsys.readouterr().out


def test_a_benchmark_stopped_by_sigterm_stops_the_tests_it_started_and_removes_its_clone(tmp_path: Path) -> None:
    """The stand-in's ``make test`` runs a shell with a child, and a process whose parent has exited (init adopts it,
    as it does the SuperLinks the deployment tests start with ``setsid``): none outlives the stopped benchmark."""
    started, orphan = tmp_path / "started", tmp_path / "orphan"  # the shell, its child and its folder (the clone)
    project = stand_in_project(
        tmp_path / "project", 0,
        f'@(sleep 600 & echo $$! > {orphan}); sleep 600 & echo "$$$$ $$! $$PWD" > {started}; wait',
    )  # fmt: skip
    benchmark = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from benchmarks import suite_time as s\n"
         "s.PROJECT_DIR, s.OUTPUT = Path(sys.argv[1]), Path(sys.argv[2]); sys.exit(s.main([]))",
         str(project), str(tmp_path / "suite_time.json")],
        cwd=Path(suite_time.__file__).parents[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not started.is_file() or not started.read_text().endswith("\n"):
            assert benchmark.poll() is None and time.monotonic() < deadline, benchmark.communicate()[0]
            time.sleep(0.05)
        shell, sleeper, clone = started.read_text().split()
        pids = [int(shell), int(sleeper), int(orphan.read_text())]
        found = start_times(pids)
        benchmark.send_signal(signal.SIGTERM)
        output = benchmark.communicate(timeout=60)[0]
        left = still_running(found)
    finally:
        benchmark.kill()
        stop_processes(pids)  # what a failure leaves, not left running
    assert benchmark.returncode == 128 + signal.SIGTERM, output
    assert left == []
    assert not Path(clone).exists() and not (tmp_path / "suite_time.json").exists()


def test_slowest_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        suite_time.main(["--slowest", "0"])
    assert "--slowest must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("slower", ["1.05", "-1", "2.5"])
def test_a_slowdown_outside_what_nice_values_give_is_refused(slower: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        suite_time.main(["--slower", slower])
    assert "--slower must be between 1.1 and 2" in capsys.readouterr().err


def test_an_emulation_runs_both_steps_beside_the_load_records_its_slowdown_and_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    competing_load_or_skip(nice=19).close()
    probe_by_cgroup(monkeypatch)
    project = stand_in_project(tmp_path / "project", test_exit=2)  # a failed run keeps its log
    output = tmp_path / "suite_time.json"
    monkeypatch.setattr(suite_time, "PROJECT_DIR", project)
    monkeypatch.setattr(suite_time, "OUTPUT", output)
    scratch = tmp_path / "tmp"  # where the benchmark's temporary clone goes
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made: list[cpu_share.CompetingLoad] = []
    clone_there_at_close: list[bool] = []

    class Load(CompetingLoad):
        def close(self) -> None:
            if not self.closed:
                clone_there_at_close.append(any(scratch.glob("fedft-suite-time-*/clone")))
            super().close()

    def load(nice: int) -> cpu_share.CompetingLoad:
        made.append(Load(nice))
        return made[-1]

    monkeypatch.setattr(suite_time, "CompetingLoad", load)  # the suite's load
    monkeypatch.setattr(cpu_share, "CompetingLoad", load)  # the probe's
    assert suite_time.main(["--slowest", "3", "--slower", "1.78"]) == 1
    [run] = json.loads(output.read_text())
    assert (run["slower"], run["competing_nice"], run["measured"]) == (1.8, 1, {"torch": 2.0, "python": 3.0})
    assert run["busy_processes"] == len(os.sched_getaffinity(0))
    *measuring, competing = made  # three for the probe's runs, then the suite's
    assert len(measuring) == 3 and all(each.nice == 1 for each in made)
    assert f"{competing.cgroup.path.name}\n" in run["log_tail"]  # make test ran in the busy processes' cgroup
    assert "ray-niceness=0\n" in run["log_tail"]  # Ray's workers at nice 0, slowed like the rest
    # the suite's load closed once, while its clone was still there (its removal is not slowed)
    assert clone_there_at_close == [False, False, False, True]
    for each in made:  # each stopped, its cgroup gone
        assert all(process.returncode is not None for process in each.busy) and not each.cgroup.path.exists()
