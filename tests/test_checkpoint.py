"""Checkpoint files: atomic round trip, clear errors, resumable configurations, the evaluate_fn wrapper."""

from __future__ import annotations

import pickle
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest
import torch

from run_config import ConfigError
from server_app import checkpoint as checkpoint_module
from server_app.background import Background
from server_app.checkpoint import (
    CHECKPOINT_FILE,
    Checkpoint,
    CheckpointError,
    CheckpointWriter,
    check_resumable,
    load_checkpoint,
    resume_point,
)
from strategies.fedentopt_selection import FedEntOptSelector
from tests.conftest import make_config


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """``checkpoint`` written as a run writes it (``CheckpointWriter``), waited for."""
    writer = CheckpointWriter(path)
    writer.save(checkpoint, lambda: None)
    writer.wait()


def a_checkpoint(server_round: int = 3, **config) -> Checkpoint:
    rng = np.random.default_rng(7)
    return Checkpoint(
        server_round=server_round,
        model={"w": torch.arange(6.0).reshape(2, 3), "bn.num_batches_tracked": torch.tensor(5)},
        selection={"buffer": [4, 1], "rng": rng.bit_generator.state},
        results={
            "rounds": [{"round": 1, "accuracy": 0.5, "client_stats": [{"partition_id": 0}]}],
            "initial_accuracy": 0.1,
        },
        config=make_config(run_name="r", **config).to_dict(),
    )


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    saved = a_checkpoint()
    save_checkpoint(path, saved)
    loaded = load_checkpoint(path)
    assert loaded.server_round == 3 and loaded.results == saved.results and loaded.config == saved.config
    assert loaded.selection == saved.selection
    assert all(torch.equal(loaded.model[k], saved.model[k]) for k in saved.model)
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_FILE]  # the temporary file was renamed


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    save_checkpoint(path, a_checkpoint(server_round=2))
    broken = a_checkpoint(server_round=3)
    broken.results = {"rounds": [lambda: 0]}  # pickling fails after the model was written
    with pytest.raises((pickle.PicklingError, AttributeError)):
        save_checkpoint(path, broken)
    assert load_checkpoint(path).server_round == 2


@pytest.mark.parametrize("content", [b"", b"garbage", b"PK\x03\x04truncated zip"])
def test_unreadable_checkpoints_raise_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / CHECKPOINT_FILE
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=r"checkpoint .* is unusable .*set resume = false"):
        load_checkpoint(path)


def test_resume_allows_operational_changes_only() -> None:
    checkpoint = a_checkpoint()
    check_resumable(
        checkpoint, make_config(run_name="r", resume=True, num_server_rounds=20, round_timeout=5.0), Path("c")
    )
    with pytest.raises(ConfigError, match=r"'local-epochs' was 5, now 2.*'seed' was 0, now 3"):
        check_resumable(checkpoint, make_config(run_name="r", resume=True, seed=3, local_epochs=2), Path("c"))
    with pytest.raises(ConfigError, match=r"'num-server-rounds' = 2 is below the 3 rounds"):
        check_resumable(checkpoint, make_config(run_name="r", resume=True, num_server_rounds=2), Path("c"))


def test_resume_point_needs_resume_and_a_file(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / CHECKPOINT_FILE, a_checkpoint())
    assert resume_point(tmp_path, make_config(run_name="r")) is None
    assert resume_point(tmp_path, make_config(run_name="r", resume=True)).server_round == 3
    assert resume_point(tmp_path / "elsewhere", make_config(run_name="r", resume=True)) is None


def test_resume_needs_a_run_name() -> None:
    with pytest.raises(ConfigError, match="'resume' = true needs a 'run-name'"):
        make_config(resume=True)


def test_fedentopt_selector_continues_identically_from_its_state() -> None:
    counts = {pid: np.eye(4)[pid % 4] * (pid + 1) for pid in range(12)}
    make = lambda: FedEntOptSelector(counts, lambda n: 3, capacity=5, seed=9)  # noqa: E731
    straight = make()
    picks = [straight(list(range(12)), rnd) for rnd in range(1, 7)]
    first_half = make()
    for rnd in range(1, 4):
        first_half(list(range(12)), rnd)
    state = first_half.state_dict()
    restored = make()
    restored.load_state_dict(state)
    assert isinstance(restored.buffer, deque)
    assert [restored(list(range(12)), rnd) for rnd in range(4, 7)] == picks[3:]


def test_a_checkpoint_without_a_setting_of_today_is_refused_naming_it() -> None:
    """The checkpoint's config is compared with today's as it is: one written before a setting existed holds no value
    for it, and no reader guesses one."""
    old = a_checkpoint()
    del old.config["aggregation"]
    with pytest.raises(ConfigError, match=r"'aggregation' was None, now 'mean'"):
        check_resumable(old, make_config(run_name="r", resume=True, aggregation="mean"), Path("c"))
    check_resumable(a_checkpoint(), make_config(run_name="r", resume=True), Path("c"))


def test_a_strategy_state_round_trips_and_older_checkpoints_hold_none(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    saved = a_checkpoint()
    saved.strategy = {"fewshot": {"head.weight": torch.ones(2, 3)}, "global": None}
    save_checkpoint(path, saved)
    loaded = load_checkpoint(path).strategy
    assert torch.equal(loaded["fewshot"]["head.weight"], torch.ones(2, 3)) and loaded["global"] is None
    older = {k: v for k, v in vars(a_checkpoint()).items() if k != "strategy"}  # written before the field existed
    torch.save(older, path)
    assert load_checkpoint(path).strategy == {}


def test_the_writer_writes_in_the_background_in_order_and_reports_each_write_once_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / CHECKPOINT_FILE
    writer = CheckpointWriter(path)
    release = threading.Semaphore(0)  # one write let through per release
    real_replace = checkpoint_module.replace_file

    def held_replace(target: Path, write: Callable[[BinaryIO], object]) -> None:
        assert release.acquire(timeout=10)  # the disk is slow until the test lets each write go on
        real_replace(target, write)

    monkeypatch.setattr(checkpoint_module, "replace_file", held_replace)
    on_disk: list[Checkpoint] = []
    first = a_checkpoint(server_round=1)
    writer.save(first, lambda: on_disk.append(load_checkpoint(path)))
    first.results["rounds"].append({"round": 2})  # changed after the save: not in the file
    assert on_disk == [] and not path.exists()  # save returned while the write waits for the disk
    release.release()
    writer.save(a_checkpoint(server_round=2), lambda: on_disk.append(load_checkpoint(path)))
    assert [c.server_round for c in on_disk] == [1]  # the second save waited for the first write, not the second
    assert on_disk[0].results == a_checkpoint(server_round=1).results
    release.release()
    writer.wait()
    assert [c.server_round for c in on_disk] == [1, 2] and load_checkpoint(path).server_round == 2


def test_a_failed_background_write_is_raised_by_the_next_wait_and_only_logged_by_settle(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / CHECKPOINT_FILE
    writer = CheckpointWriter(path)
    writer.save(a_checkpoint(server_round=1), lambda: None)
    writer.wait()
    saved: list[int] = []
    writer.path = tmp_path / "gone" / CHECKPOINT_FILE  # its folder does not exist: the write fails
    writer.save(a_checkpoint(server_round=2), lambda: saved.append(2))
    with pytest.raises(FileNotFoundError):
        writer.wait()
    assert saved == [] and load_checkpoint(path).server_round == 1
    writer.wait()  # the failure was reported once
    writer.save(a_checkpoint(server_round=3), lambda: saved.append(3))
    writer.settle()
    assert saved == [] and "the last checkpoint could not be written (FileNotFoundError" in caplog.text


def test_a_wait_cut_short_leaves_the_write_for_settle_to_wait_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a save waits for the previous write: the stop's ``settle`` must still wait for that write."""
    path = tmp_path / CHECKPOINT_FILE
    release = threading.Event()
    real_replace = checkpoint_module.replace_file

    def held_replace(target: Path, write: Callable[[BinaryIO], object]) -> None:
        assert release.wait(10)
        real_replace(target, write)

    monkeypatch.setattr(checkpoint_module, "replace_file", held_replace)
    writer = CheckpointWriter(path)
    events: list[str] = []
    writer.save(a_checkpoint(server_round=1), lambda: events.append("written"))
    monkeypatch.setattr(Background, "result", lambda self: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        writer.wait()
    monkeypatch.undo()  # the real Background.result and replace_file again; the write is still held
    monkeypatch.setattr(checkpoint_module, "replace_file", held_replace)
    stop = threading.Thread(target=lambda: (writer.settle(), events.append("settled")))
    stop.start()
    stop.join(0.5)
    assert stop.is_alive() and events == []  # settle waits for the held write
    release.set()
    stop.join(10)
    assert events == ["written", "settled"] and load_checkpoint(path).server_round == 1
