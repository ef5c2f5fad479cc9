"""The memory-limit benchmark's parts: the bisection, what makes two runs the same, a run stopped at its timeout, and
the bookkeeping of a bisection (its cgroup: tests/test_cgroup.py)."""

from __future__ import annotations

import os

import pytest

from benchmarks.memory_limit import outcome, smallest_passing


def test_bisection_finds_the_smallest_passing_limit_and_probes_high_first() -> None:
    probed: list[float] = []

    def passes(limit: float) -> bool:
        probed.append(limit)
        return limit >= 2.3

    assert smallest_passing(passes, 1.0, 4.0, 0.25) == 2.5
    assert probed[0] == 4.0
    assert len(probed) == len(set(probed)) <= 5  # 13 grid points: the top, then at most 4 halvings


def test_bisection_returns_the_low_end_when_everything_passes_and_none_when_nothing_does() -> None:
    assert smallest_passing(lambda limit: True, 1.0, 2.0, 0.5) == 1.0
    assert smallest_passing(lambda limit: False, 1.0, 2.0, 0.5) is None


def test_a_grid_that_is_not_whole_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="whole steps of 0.3 GiB"):
        smallest_passing(lambda limit: True, 1.0, 2.0, 0.3)


def test_outcome_compares_accuracy_and_cohort_per_round_not_timings() -> None:
    a = [{"accuracy": 0.5, "clients": [3, 1], "wall_seconds": 1.0}]
    b = [{"accuracy": 0.5, "clients": [1, 3], "wall_seconds": 9.0}]
    assert outcome(a) == outcome(b)
    assert outcome(a) != outcome([{"accuracy": 0.5, "clients": [1]}])
    assert outcome(a) != outcome([{"accuracy": 0.51, "clients": [1, 3]}])


def test_a_run_past_its_timeout_is_stopped_with_everything_it_started(tmp_path) -> None:
    """``run_simulation_measured`` with a timeout, on a stand-in ``python -m simulation`` that starts a child and
    hangs: ``preexec_fn`` ran in the command's process, the exit code is 124, and neither process is left."""
    from benchmarks.measured_run import run_simulation_measured
    from simulation.local_run import _start_time

    package = tmp_path / "simulation"
    package.mkdir()
    (package / "__init__.py").write_text("")
    pids = tmp_path / "pids"
    (package / "__main__.py").write_text(
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)\n"
    )
    entered = tmp_path / "entered"
    run = run_simulation_measured(
        {}, num_supernodes=1, results_dir=tmp_path / "results", log_file=tmp_path / "log", project_dir=tmp_path,
        preexec_fn=lambda: entered.write_text(str(os.getpid())), timeout=3.0,
    )  # fmt: skip
    assert entered.read_text() == pids.read_text().split()[0]
    assert run.exit_code == 124
    assert 3.0 <= run.wall_seconds < 30.0
    assert [_start_time(int(pid)) for pid in pids.read_text().split()] == [None, None]


def test_measure_saves_after_every_run_and_ends_with_the_smallest_passing_limit(monkeypatch, tmp_path) -> None:
    """The bisection's bookkeeping, with a stand-in for the runs: a run passes at 2.5 GiB and above."""
    import benchmarks.memory_limit as memory_limit

    def fake_run(checkout, overrides, limit, work, reference, expected, slowdown):
        passed = limit is None or limit >= 2.5
        return memory_limit.LimitedRun(limit, 0 if passed else 124, 1.0, limit or 3.0, 2.0, 0, passed), [(0.5, [0])]

    monkeypatch.setattr(memory_limit, "run_limited", fake_run)
    monkeypatch.setattr(memory_limit.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "work"))
    (tmp_path / "work" / "caches-reference").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("")  # a checkout without a shared data cache
    saved: list[tuple[int, object]] = []

    def save(result: dict) -> None:
        saved.append((len(result["runs"]), result["smallest_passing_limit_gib"]))

    result = memory_limit.measure("scale10", tmp_path, 1.0, 4.0, 0.5, 1.5, {}, save)
    assert result["smallest_passing_limit_gib"] == 2.5
    assert [r["limit_gib"] for r in result["runs"]][0] == 4.0
    assert [count for count, _ in saved] == [0, *range(1, len(result["runs"]) + 1), len(result["runs"])]
    assert [smallest for _, smallest in saved][:-1] == [None] * (len(saved) - 1) and saved[-1][1] == 2.5
    assert not (tmp_path / "work" / "caches-reference").exists()  # the caches go, the logs would stay


def test_cache_overrides_name_the_data_cache_only_for_a_checkout_that_has_one(tmp_path) -> None:
    from benchmarks.measured_run import cache_overrides

    (tmp_path / "pyproject.toml").write_text('pretrain-cache-dir = ""\n')
    assert cache_overrides(tmp_path, tmp_path / "c") == {
        "pretrain-cache-dir": str(tmp_path / "c" / "pretrained"),
        "feature-cache-dir": str(tmp_path / "c" / "features"),
    }
    (tmp_path / "pyproject.toml").write_text('data-cache-dir = "~/.cache/fedft/arrays"\n')
    assert cache_overrides(tmp_path, tmp_path / "c")["data-cache-dir"] == str(tmp_path / "c" / "arrays")
