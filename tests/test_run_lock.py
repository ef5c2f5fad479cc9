"""The run folder lock: one run per folder, released when the run ends or its process dies; no escape from
results-dir through a symlink; results files replaced atomically."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from server_app.atomic_write import replace_file, replace_text
from server_app.run_errors import RunSetupError
from server_app.run_lock import LOCK_FILE, RunFolderError, lock_run_folder, remove_if_unused
from tests.in_process import ServerKilled, run_in_process, small_run_config

PROJECT = Path(__file__).resolve().parents[1]
HOLD_LOCK = """
import sys, time
from pathlib import Path
from server_app.run_lock import lock_run_folder
lock = lock_run_folder(Path(sys.argv[1]), sys.argv[2], resume=True)
print("locked", flush=True)
time.sleep(120)
"""


@contextmanager
def lock_held_by_another_process(directory: Path, results_dir: Path) -> Iterator[subprocess.Popen]:
    """A child process holding the lock on ``directory`` until the block ends (then it is killed)."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(directory), str(results_dir)],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        child.kill()
        child.wait()


def test_a_second_lock_is_refused_naming_the_folder_until_the_first_is_released(tmp_path: Path) -> None:
    run = tmp_path / "results" / "r"
    first = lock_run_folder(run, tmp_path / "results", resume=False)
    with pytest.raises(RunFolderError) as err:
        lock_run_folder(run, tmp_path / "results", resume=True)
    assert str(err.value) == (
        f"run folder {run} is in use by another run (process {os.getpid()}); wait for it to "
        "end or choose another run-name"
    )
    first.release()
    lock_run_folder(run, tmp_path / "results", resume=False).release()


def test_a_lock_held_by_another_process_refuses_until_that_process_dies(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = results / "r"
    with lock_held_by_another_process(run, results) as child:
        (run / "checkpoint.pt").write_bytes(b"written by the first run")
        in_use = rf"^run folder {run} is in use by another run \(process {child.pid}\)"
        with pytest.raises(RunFolderError, match=in_use):
            lock_run_folder(run, results, resume=True)
    # killed: the kernel dropped its lock; resuming may go on, starting afresh may not
    with pytest.raises(RunFolderError) as err:
        lock_run_folder(run, results, resume=False)
    assert str(err.value) == (
        f"run folder {run} holds an earlier run; set resume = true to go on from its "
        "checkpoint, or choose another run-name (or remove the folder)"
    )
    with lock_run_folder(run, results, resume=True) as lock:
        assert lock.directory == run
        assert (run / LOCK_FILE).read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("earlier", ["config.json", "rounds.jsonl", "checkpoint.pt", "summary.json", "model.pt"])
def test_a_folder_holding_an_earlier_run_needs_resume(tmp_path: Path, earlier: str) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / earlier).write_text("")
    with pytest.raises(RunFolderError, match="holds an earlier run"):
        lock_run_folder(run, tmp_path, resume=False)
    lock_run_folder(run, tmp_path, resume=True).release()


def test_a_run_folder_linked_outside_results_dir_is_refused_and_nothing_written_there(tmp_path: Path) -> None:
    results, outside = tmp_path / "results", tmp_path / "outside"
    results.mkdir()
    outside.mkdir()
    (results / "r").symlink_to(outside)
    with pytest.raises(RunFolderError) as err:
        lock_run_folder(results / "r", results, resume=False)
    assert str(err.value) == (
        f"run folder {results / 'r'} resolves to {outside.resolve()}, which is not inside "
        f"results-dir {results.resolve()}; remove the link or choose another run-name"
    )
    assert list(outside.iterdir()) == []


def test_a_dangling_link_outside_results_dir_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "r").symlink_to(tmp_path / "not-yet")
    with pytest.raises(RunFolderError, match="which is not inside results-dir"):
        lock_run_folder(results / "r", results, resume=False)
    assert not (tmp_path / "not-yet").exists()


def test_a_link_to_results_dir_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r").symlink_to(tmp_path)
    with pytest.raises(RunFolderError, match="which is not inside results-dir"):
        lock_run_folder(tmp_path / "r", tmp_path, resume=False)


def test_results_dir_may_itself_be_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "results").symlink_to(tmp_path / "real")
    lock_run_folder(tmp_path / "results" / "r", tmp_path / "results", resume=False).release()
    assert (tmp_path / "real" / "r" / LOCK_FILE).is_file()


def test_a_lock_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunFolderError, match=rf"run folder {run} cannot be locked: .*\.lock\)"):
        lock_run_folder(run, tmp_path, resume=False)
    assert not (tmp_path / "elsewhere").exists()


def test_a_failed_replacement_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    replace_text(path, "old")

    def fail_midway(handle) -> None:
        handle.write(b"half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(path, fail_midway)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    replace_text(path, "new")
    assert path.read_text() == "new"


def quick_run_config(tmp_path: Path, **overrides) -> dict:
    return small_run_config(tmp_path, **{"pretrain": "none", "num-server-rounds": 1, **overrides})


def test_the_server_refuses_a_run_folder_another_process_writes_and_writes_nothing(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with lock_held_by_another_process(results / "run", results) as child, pytest.raises(RunSetupError) as err:
        run_in_process(quick_run_config(tmp_path, resume=True))
    assert str(err.value) == (
        f"run folder {results.resolve() / 'run'} is in use by another run (process "
        f"{child.pid}); wait for it to end or choose another run-name"
    )
    assert [p.name for p in (results / "run").iterdir()] == [LOCK_FILE]


def test_a_finished_run_releases_its_folder_and_only_resume_may_reuse_it(tmp_path: Path) -> None:
    run = tmp_path / "results" / "run"
    run_in_process(quick_run_config(tmp_path))
    lock_run_folder(run, tmp_path / "results", resume=True).release()
    summary = (run / "summary.json").read_text()
    with pytest.raises(RunSetupError, match=rf"^run folder {run.resolve()} holds an earlier run; set resume = true"):
        run_in_process(quick_run_config(tmp_path))
    assert (run / "summary.json").read_text() == summary
    run_in_process(quick_run_config(tmp_path, resume=True))  # the finished run's checkpoint: nothing left to train


def test_a_run_that_dies_releases_its_folder(tmp_path: Path) -> None:
    with pytest.raises(ServerKilled):
        run_in_process(quick_run_config(tmp_path), kill_at_round=1)
    lock_run_folder(tmp_path / "results" / "run", tmp_path / "results", resume=True).release()


def test_a_run_refused_at_start_leaves_no_empty_folder_behind(tmp_path: Path) -> None:
    with pytest.raises(RunSetupError, match="min-train-nodes"):
        run_in_process(quick_run_config(tmp_path, **{"min-train-nodes": 5}))  # 4 clients
    assert not (tmp_path / "results" / "run").exists()


def test_a_folder_that_was_there_before_is_kept_after_a_refused_run(tmp_path: Path) -> None:
    (tmp_path / "results" / "run").mkdir(parents=True)
    with pytest.raises(RunSetupError, match="min-train-nodes"):
        run_in_process(quick_run_config(tmp_path, **{"min-train-nodes": 5}))
    assert [p.name for p in (tmp_path / "results" / "run").iterdir()] == [LOCK_FILE]


def test_only_a_folder_holding_nothing_but_its_lock_is_removed(tmp_path: Path) -> None:
    for extra in ([], ["config.json"]):
        run = tmp_path / f"run-{len(extra)}"
        lock_run_folder(run, tmp_path, resume=True).release()
        for name in extra:
            (run / name).write_text("{}")
        remove_if_unused(run)
        assert run.exists() == bool(extra)
    remove_if_unused(tmp_path / "never-made")  # nothing to remove: no error
