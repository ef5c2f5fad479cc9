"""Whole runs with injected faults, a killed server and repeats (the real apps, in one process)."""

from __future__ import annotations

import io
import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pytest
import torch

from server_app import checkpoint as checkpoint_module
from server_app import lifecycle
from server_app.background import Background
from server_app.checkpoint import CHECKPOINT_FILE, Checkpoint, CheckpointWriter, load_checkpoint
from server_app.results import RunRecorder
from server_app.run_errors import RunFailedError, RunSetupError, RunStopped
from tests.in_process import ServerKilled, flower_stop, run_in_process, small_run_config

#: Measured durations differ between two executions of the same computation; nothing else may.
TIMING_FIELDS = {"wall_seconds", "client_train_seconds"}
CLIENT_TIMING_FIELDS = {"train_seconds", "selection_seconds", "cache_seconds"}


def rounds_of(results: Path, run_name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (results / run_name / "rounds.jsonl").read_text().splitlines()]


def without_timings(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = []
    for record in rounds:
        record = {k: v for k, v in record.items() if k not in TIMING_FIELDS}
        record["client_stats"] = [
            {k: v for k, v in s.items() if k not in CLIENT_TIMING_FIELDS} for s in record["client_stats"]
        ]
        kept.append(record)
    return kept


def fedentopt_config(tmp_path: Path, run_name: str, **overrides: Any) -> dict[str, Any]:
    """FedFT-EDS with FedEntOpt selection: the selector's buffer and generator must survive a restart."""
    return small_run_config(
        tmp_path,
        **{
            "run-name": run_name,
            "client-selection": "fedentopt",
            "fraction-train": 0.5,
            "num-server-rounds": 4,
            **overrides,
        },
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    run_in_process(fedentopt_config(tmp_path, "a"))
    return tmp_path


def test_one_seed_gives_the_same_partitions_cohorts_selections_and_accuracies(uninterrupted: Path) -> None:
    run_in_process(fedentopt_config(uninterrupted, "repeat"))
    results = uninterrupted / "results"
    first, repeat = rounds_of(results, "a"), rounds_of(results, "repeat")
    assert without_timings(repeat) == without_timings(first)  # cohorts, sizes, entropies, accuracies, bytes
    assert [len(r["clients"]) for r in first] == [2, 2, 2, 2]
    first_model = torch.load(results / "a" / "model.pt")
    repeat_model = torch.load(results / "repeat" / "model.pt")
    assert all(torch.equal(first_model[k], repeat_model[k]) for k in first_model)


def test_another_seed_gives_another_run(uninterrupted: Path) -> None:
    run_in_process(fedentopt_config(uninterrupted, "seed1", seed=1, **{"num-server-rounds": 1}))
    results = uninterrupted / "results"
    other, first = rounds_of(results, "seed1")[0], rounds_of(results, "a")[0]
    assert (other["accuracy"], other["loss"]) != (first["accuracy"], first["loss"])


def test_a_killed_run_resumes_and_ends_as_the_uninterrupted_one(uninterrupted: Path) -> None:
    results = uninterrupted / "results"
    with pytest.raises(ServerKilled):
        run_in_process(fedentopt_config(uninterrupted, "killed"), kill_at_round=3)
    assert load_checkpoint(results / "killed" / CHECKPOINT_FILE).server_round == 2
    assert len(rounds_of(results, "killed")) == 2

    grid = run_in_process(fedentopt_config(uninterrupted, "killed", resume=True))
    resumed, first = rounds_of(results, "killed"), rounds_of(results, "a")
    trained_rounds = {m.content["config"]["server-round"] for m in grid.sent if m.metadata.message_type == "train"}
    assert trained_rounds == {3, 4}  # only the rounds the kill cost were run again

    # A resumed run is a new Flower run whose clients hold no φ yet: each gets it again when first
    # selected, so rounds 3 and 4 send more bytes. Nothing else differs.
    for before, after in zip(first[2:], resumed[2:]):
        assert after.pop("bytes_down") > before.pop("bytes_down")
    assert without_timings(resumed) == without_timings(first)
    summary = json.loads((results / "killed" / "summary.json").read_text())
    uninterrupted_summary = json.loads((results / "a" / "summary.json").read_text())
    assert summary["final_accuracy"] == uninterrupted_summary["final_accuracy"]
    assert summary["rounds"] == 4
    assert summary["start_fingerprint"] == uninterrupted_summary["start_fingerprint"] is not None  # kept across it


def test_a_run_stopped_by_a_signal_records_the_rounds_done_before_it_and_resumes(uninterrupted: Path) -> None:
    """Flower's exit handlers run (as on SIGINT) when round 3's training starts, and the ServerApp goes on, as it
    does in the engine until the process ends: summary.json says ``interrupted``, and it, rounds.jsonl and the
    checkpoint hold rounds 1 and 2."""
    results = uninterrupted / "results"
    run_in_process(fedentopt_config(uninterrupted, "stopped"), stop_at_round=3)
    summary = json.loads((results / "stopped" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 2
    assert len(rounds_of(results, "stopped")) == 2
    assert load_checkpoint(results / "stopped" / CHECKPOINT_FILE).server_round == 2
    assert not (results / "stopped" / "model.pt").exists()

    run_in_process(fedentopt_config(uninterrupted, "stopped", resume=True))
    resumed = json.loads((results / "stopped" / "summary.json").read_text())
    assert resumed["status"] == "completed" and resumed["rounds"] == 4
    assert resumed["final_accuracy"] == json.loads((results / "a" / "summary.json").read_text())["final_accuracy"]


def test_a_run_stopped_while_it_starts_records_the_stop_and_resumes_afresh(uninterrupted: Path) -> None:
    """Flower's exit handlers run (as on SIGINT) while the clients answer the identity query, pretraining
    meanwhile, and the process ends: summary.json says ``interrupted`` with no rounds, beside config.json and an
    empty rounds.jsonl; ``resume = true`` then runs it afresh to the uninterrupted run's result."""
    results = uninterrupted / "results"
    with pytest.raises(ServerKilled):
        run_in_process(fedentopt_config(uninterrupted, "stopped-early"), stop_at_start=True)
    folder = results / "stopped-early"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 0 and summary["best_accuracy"] is None
    assert summary["machine"]["device"] == "cpu"
    assert json.loads((folder / "config.json").read_text())["run-name"] == "stopped-early"
    assert (folder / "rounds.jsonl").read_text() == ""
    assert not (folder / CHECKPOINT_FILE).exists() and not (folder / "model.pt").exists()

    run_in_process(fedentopt_config(uninterrupted, "stopped-early", resume=True))
    assert without_timings(rounds_of(results, "stopped-early")) == without_timings(rounds_of(results, "a"))
    assert json.loads((folder / "summary.json").read_text())["status"] == "completed"


def test_a_resumed_run_stopped_while_it_starts_keeps_the_summary_it_resumes_from(uninterrupted: Path) -> None:
    results = uninterrupted / "results"
    run_in_process(fedentopt_config(uninterrupted, "twice"), stop_at_round=3)
    before = (results / "twice" / "summary.json").read_text()
    with pytest.raises(ServerKilled):
        run_in_process(fedentopt_config(uninterrupted, "twice", resume=True), stop_at_start=True)
    assert (results / "twice" / "summary.json").read_text() == before  # interrupted after round 2, as it was
    assert load_checkpoint(results / "twice" / CHECKPOINT_FILE).server_round == 2


def test_a_run_stopped_late_in_its_start_does_not_go_on_to_record_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop (Flower's exit handlers, as on SIGINT, from another thread in the engine) comes after pretraining,
    during the start checks, and the ServerApp's thread would go on until the engine ends the process: it stops
    instead of recording rounds beside the summary of the stop."""
    checked = lifecycle.check_population

    def stopped_meanwhile(*args: Any) -> None:
        checked(*args)
        flower_stop()

    monkeypatch.setattr(lifecycle, "check_population", stopped_meanwhile)
    with pytest.raises(RunStopped):
        run_in_process(fedentopt_config(tmp_path, "late"))
    folder = tmp_path / "results" / "late"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 0
    assert (folder / "rounds.jsonl").read_text() == "" and not (folder / CHECKPOINT_FILE).exists()


def test_a_stop_while_a_refused_start_unwinds_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused start waits for its cancelled pretraining: a stop during that wait has no run to record, and the
    folder the refused run created is removed, as without the stop."""
    cancel = Background.cancel

    def stopped_meanwhile(background: Background, wait: float = 0.0) -> None:
        flower_stop()
        cancel(background, wait)

    monkeypatch.setattr(Background, "cancel", stopped_meanwhile)
    with pytest.raises(RunSetupError):
        run_in_process(fedentopt_config(tmp_path, "refused", **{"fraction-train": 0.01, "min-train-nodes": 3}))
    assert not (tmp_path / "results" / "refused").exists()


def test_ctrl_c_while_a_run_starts_is_recorded_as_a_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KeyboardInterrupt in the ServerApp's own thread during the start checks (an in-process cell)."""

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "check_population", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_in_process(fedentopt_config(tmp_path, "ctrl-c-at-start"))
    summary = json.loads((tmp_path / "results" / "ctrl-c-at-start" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 0


def test_a_stop_after_the_run_ended_writes_nothing(tmp_path: Path) -> None:
    """Flower keeps exit handlers for the life of the process: a later stop (another in-process cell) must leave
    an ended run's files alone, a completed one's and a refused one's (whose folder was removed) alike."""
    run_in_process(fedentopt_config(tmp_path, "done", **{"num-server-rounds": 1}))
    with pytest.raises(RunSetupError):
        run_in_process(fedentopt_config(tmp_path, "refused", **{"fraction-train": 0.01, "min-train-nodes": 3}))
    summary = (tmp_path / "results" / "done" / "summary.json").read_text()
    flower_stop()
    assert (tmp_path / "results" / "done" / "summary.json").read_text() == summary
    assert json.loads(summary)["status"] == "completed"
    assert not (tmp_path / "results" / "refused").exists()


def test_ctrl_c_between_a_rounds_record_and_its_checkpoint_leaves_the_files_agreeing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyboardInterrupt in the ServerApp's own thread while round 2's checkpoint is being saved (Ctrl-C in an
    in-process cell): summary.json, rounds.jsonl and the checkpoint all end at round 1."""
    save = CheckpointWriter.save

    def interrupted_at_round_2(writer: CheckpointWriter, checkpoint: Checkpoint, saved: Callable[[], None]) -> None:
        if checkpoint.server_round == 2:
            raise KeyboardInterrupt
        save(writer, checkpoint, saved)

    monkeypatch.setattr(CheckpointWriter, "save", interrupted_at_round_2)
    with pytest.raises(KeyboardInterrupt):
        run_in_process(fedentopt_config(tmp_path, "ctrl-c"))
    results = tmp_path / "results"
    summary = json.loads((results / "ctrl-c" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 1
    assert [r["round"] for r in rounds_of(results, "ctrl-c")] == [1]
    assert load_checkpoint(results / "ctrl-c" / CHECKPOINT_FILE).server_round == 1


def test_a_stop_while_a_checkpoint_is_still_being_written_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoints are written in the background: a stop that comes while round 2's is still on its way to a
    slow disk (here: held until round 3's training has started and the stop has come) records the rounds of the
    checkpoint that lands, in summary.json and rounds.jsonl alike."""
    stopped = threading.Event()
    replace = checkpoint_module.replace_file

    def slow_disk(path: Path, write: Callable[[BinaryIO], object]) -> None:
        if load_round(write) == 2:
            assert stopped.wait(30)
        replace(path, write)

    def load_round(write: Callable[[BinaryIO], object]) -> int:
        buffer = io.BytesIO()
        write(buffer)
        buffer.seek(0)
        return int(torch.load(buffer, weights_only=False)["server_round"])

    monkeypatch.setattr(checkpoint_module, "replace_file", slow_disk)
    real_stopped = RunRecorder.stopped

    def stop_seen(recorder: RunRecorder, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        stopped.set()  # the disk goes on only now: the stop must wait for round 2's write
        return real_stopped(recorder, *args, **kwargs)

    monkeypatch.setattr(RunRecorder, "stopped", stop_seen)
    run_in_process(fedentopt_config(tmp_path, "slow-disk"), stop_at_round=3)
    folder = tmp_path / "results" / "slow-disk"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["rounds"] == 2
    assert [r["round"] for r in rounds_of(tmp_path / "results", "slow-disk")] == [1, 2]
    assert load_checkpoint(folder / CHECKPOINT_FILE).server_round == 2


def test_a_failed_write_of_the_last_checkpoint_records_a_failed_run_at_the_checkpoint_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last round's checkpoint cannot be written (a full disk): the run fails, and summary.json, rounds.jsonl
    and the checkpoint on disk hold the rounds before it."""
    replace = checkpoint_module.replace_file

    def full_disk_at_round_4(path: Path, write: Callable[[BinaryIO], object]) -> None:
        buffer = io.BytesIO()
        write(buffer)
        buffer.seek(0)
        if torch.load(buffer, weights_only=False)["server_round"] == 4:
            raise OSError(28, "No space left on device")
        replace(path, write)

    monkeypatch.setattr(checkpoint_module, "replace_file", full_disk_at_round_4)
    with pytest.raises(OSError, match="No space left"):
        run_in_process(fedentopt_config(tmp_path, "full-disk"))
    folder = tmp_path / "results" / "full-disk"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds"] == 3 and "No space left" in summary["failure"]
    assert [r["round"] for r in rounds_of(tmp_path / "results", "full-disk")] == [1, 2, 3]
    assert load_checkpoint(folder / CHECKPOINT_FILE).server_round == 3
    assert not (folder / "model.pt").exists()


def test_failing_hanging_and_garbage_clients_are_left_out(tmp_path: Path) -> None:
    config = small_run_config(
        tmp_path, **{"fail-partitions": "1:raise,2:garbage,3:hang", "round-timeout": 3.0, "num-server-rounds": 2}
    )
    run_in_process(config)
    for record in rounds_of(tmp_path / "results", "run"):
        assert sorted(record["clients"]) == [0, 1, 2, 3] and record["aggregated"] is True
        assert [s["partition_id"] for s in record["client_stats"]] == [0]  # the only sound update
        (failed,) = record["failed"]
        assert failed["partition_id"] == 1 and failed["reason"].startswith("InjectedFault: fail-partitions")
        (rejected,) = record["rejected"]
        assert rejected["partition_id"] == 2 and rejected["reason"].endswith("holds NaN or infinite values")
        assert record["timed_out"] == [3]
        assert math.isfinite(record["accuracy"])
    model = torch.load(tmp_path / "results" / "run" / "model.pt")
    assert all(torch.isfinite(v).all() for v in model.values() if v.is_floating_point())


def test_a_run_in_which_no_round_aggregates_fails_naming_the_first_client_error(tmp_path: Path) -> None:
    config = small_run_config(
        tmp_path, **{"fail-partitions": "0:raise,1:raise,2:raise", "min-train-nodes": 2, "num-server-rounds": 2}
    )
    with pytest.raises(RunFailedError, match="no round aggregated an update: round 1: client 0 failed: InjectedFault"):
        run_in_process(config)
    rounds = rounds_of(tmp_path / "results", "run")
    summary = json.loads((tmp_path / "results" / "run" / "summary.json").read_text())
    assert [r["aggregated"] for r in rounds] == [False, False]
    assert [r["accuracy"] for r in rounds] == [summary["initial_accuracy"]] * 2
    assert [s["partition_id"] for s in rounds[0]["client_stats"]] == [3]
    assert summary["status"] == "failed" and summary["rounds_aggregated"] == 0 and summary["rounds_skipped"] == 2
    assert summary["failure"].startswith("round 1: client 0 failed: InjectedFault: fail-partitions")


def test_skipped_rounds_are_warnings_when_another_round_aggregates(tmp_path: Path) -> None:
    """One client a round (seed 0 picks partitions 2, 3, 2); partition 2 raises, so rounds 1 and 3 are skipped."""
    config = small_run_config(
        tmp_path, **{"fail-partitions": "2:raise", "fraction-train": 0.25, "num-server-rounds": 3}
    )
    run_in_process(config)
    rounds = rounds_of(tmp_path / "results", "run")
    summary = json.loads((tmp_path / "results" / "run" / "summary.json").read_text())
    assert [r["clients"] for r in rounds] == [[2], [3], [2]]
    assert [r["aggregated"] for r in rounds] == [False, True, False]
    assert summary["status"] == "completed" and summary["failure"] is None
    assert summary["rounds_skipped"] == 2 and summary["rounds_aggregated"] == 1


def test_a_corrupt_checkpoint_stops_the_run_with_a_clear_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "results" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    with pytest.raises(RunSetupError, match=r"checkpoint .*checkpoint.pt is unusable .*set resume = false"):
        run_in_process(small_run_config(tmp_path, resume=True))


def test_resuming_under_another_configuration_names_the_keys(tmp_path: Path) -> None:
    with pytest.raises(ServerKilled):
        run_in_process(small_run_config(tmp_path), kill_at_round=2)
    with pytest.raises(RunSetupError, match=r"differs from the checkpoint .*'learning-rate' was 0.1, now 0.2"):
        run_in_process(small_run_config(tmp_path, resume=True, **{"learning-rate": 0.2}))


def test_a_moved_results_folder_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Where results live is not what the run computes: a stopped run's folder moved elsewhere goes on there."""
    with pytest.raises(ServerKilled):
        run_in_process(small_run_config(tmp_path), kill_at_round=2)
    (tmp_path / "results").rename(tmp_path / "moved")
    run_in_process(small_run_config(tmp_path, resume=True, **{"results-dir": str(tmp_path / "moved")}))
    assert [r["round"] for r in rounds_of(tmp_path / "moved", "run")] == [1, 2, 3]


def test_stragglers_drop_out_reproducibly_and_are_recorded(tmp_path: Path) -> None:
    config = small_run_config(tmp_path, **{"straggler-fraction": 0.5, "num-server-rounds": 2})
    run_in_process(config)
    rounds = rounds_of(tmp_path / "results", "run")
    for record in rounds:
        assert len(record["dropped"]) == 2 and len(record["clients"]) == 2
        assert not set(record["dropped"]) & set(record["clients"])
        assert sorted(s["partition_id"] for s in record["client_stats"]) == sorted(record["clients"])
    assert rounds[0]["dropped"] != rounds[1]["dropped"] or rounds[0]["clients"] != rounds[1]["clients"]


def test_a_batchnorm_model_is_aggregated_round_after_round(tmp_path: Path) -> None:
    run_in_process(small_run_config(tmp_path, model="wrn-10-1", **{"num-server-rounds": 2}))
    for record in rounds_of(tmp_path / "results", "run"):
        assert record["aggregated"] is True and record["rejected"] == [] and len(record["client_stats"]) == 4


@pytest.fixture
def one_thread():
    """One torch thread: pretraining then runs in about a second even on a busy two-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_one_scaled_update_collapses_plain_fedavg_but_not_the_default_clipped_mean(tmp_path: Path, one_thread) -> None:
    """1 of 8 FedFT-EDS clients sends θ + 100·Δ: `mean` ends at chance, `clipped-mean` near the honest run."""
    # A strong start (pretrained on the task's own held-out images), so that the honest run is well above chance.
    base = {"dataset": "fashion-mnist-mini", "pretrain": "public", "pretrain-samples": 0, "pretrain-epochs": 5}
    final = {}
    for name, overrides in (
        ("honest", {}),
        ("mean", {"aggregation": "mean", "fail-partitions": "0:scale100"}),
        ("clipped", {"fail-partitions": "0:scale100"}),
    ):
        run_in_process(small_run_config(tmp_path, **{**base, **overrides, "run-name": name}), num_partitions=8)
        final[name] = rounds_of(tmp_path / "results", name)[-1]
    assert final["honest"]["accuracy"] > 0.5
    assert final["mean"]["accuracy"] < 0.2  # ten classes: chance is 0.1
    assert final["clipped"]["accuracy"] > final["honest"]["accuracy"] - 0.05
    assert 0 in final["clipped"]["clipped"] and "clipped" not in final["mean"]


def test_impossible_aggregation_settings_stop_the_run_at_start(tmp_path: Path) -> None:
    config = small_run_config(
        tmp_path,
        **{"aggregation": "bulyan", "byzantine-clients": 2, "pretrain-cache-dir": str(tmp_path / "pretrained")},
    )
    with pytest.raises(
        RunSetupError,
        match=r"'byzantine-clients' = 2 is too many for 'aggregation' = 'bulyan' with "
        r"8 clients per round: it needs at least 4f \+ 3 = 11",
    ):
        run_in_process(config, num_partitions=8)
    assert not (tmp_path / "pretrained").exists()  # refused before pretraining


def test_a_split_no_client_can_make_ends_the_run_naming_the_reason_instead_of_waiting(tmp_path: Path) -> None:
    """Each client computes its partition when asked who it is; when none can, every node is refused alike."""
    config = small_run_config(tmp_path, **{"min-partition-size": 500})
    with pytest.raises(
        RunSetupError,
        match=r"^no client could join: all 4 connected nodes were refused \(0 s after the start; "
        r"'node-wait-seconds' = 0\); 4 with: error reply: PartitioningError: min-partition-size = 500 is impossible: "
        r"4 clients x 500 > 640 training samples$",
    ):
        run_in_process(config)
