"""The experiment runner: every cell runs once, finished cells are skipped, failures are reported, stale
results are refused, and the report is written. Cells run the real ServerApp and ClientApp in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.cell_archive import ARCHIVE_FILE, CELLS_DIR, recorded_cells
from experiments.cell_results import config_differences, read_rounds
from experiments.provenance import checkout_state
from experiments.report import finished_results, write_report
from experiments.runner import (
    StaleResultsError,
    cell_run_config,
    check_finished_cells,
    run_experiment,
    unfinished_cells,
    unread_settings,
)
from experiments.spec import load_experiment
from methods.registry import parse_config
from run_config.defaults import load_defaults
from server_app.pretraining import RECIPE_VERSION
from simulation.local_run import Resources
from tests.in_process import ServerKilled, run_in_process, small_run_config


def write_experiment(tmp_path: Path, **changes) -> Path:
    small = small_run_config(tmp_path)
    base = {
        key: small[key]
        for key in (
            "dataset",
            "model",
            "pretrain-epochs",
            "pretrain-samples",
            "pretrain-round",
            "num-server-rounds",
            "local-epochs",
            "batch-size",
            "dirichlet-alpha",
            "min-partition-size",
            "node-wait-seconds",
            "pretrain-cache-dir",
            "feature-cache-dir",
            "client-threads",
        )
    }
    raw = {
        "description": "test",
        "cost": "seconds",
        "clients": 4,
        "base": base,
        "methods": ["fedft-eds", "fedft-rds"],
        "seeds": [0, 1],
        "entropy-histogram": {"temperatures": [0.1, 1.0], "partition": 1},
        **changes,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


class InProcessCells:
    """A ``RunCell`` that runs each cell's real ServerApp in this process; ``fail`` names cells that exit 1."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.ran: list[str] = []
        self.fail = fail

    def __call__(self, overrides: dict, clients: int, resources: Resources, log_file: Path) -> int:
        self.ran.append(overrides["run-name"])
        log_file.write_text("in-process\n")
        if overrides["run-name"] in self.fail:
            return 1
        run_in_process(small_run_config(Path("/nonexistent"), **overrides), num_partitions=clients)
        return 0


def test_runs_every_cell_once_then_skips_finished_cells(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path))
    results_dir = tmp_path / "out"
    lines: list[str] = []
    cells = InProcessCells(fail=("fedft-rds__seed1",))
    outcome = run_experiment(experiment, results_dir, run_cell=cells, echo=lines.append)
    assert cells.ran == ["fedft-eds__seed0", "fedft-eds__seed1", "fedft-rds__seed0", "fedft-rds__seed1"]
    assert [c.name for c in outcome.failed] == ["fedft-rds__seed1"]
    assert lines[-1] == f"fedft-rds__seed1: failed (exit code 1); see {results_dir / 'logs' / 'fedft-rds__seed1.log'}"
    assert any(line.startswith("[0/4 cells] fedft-eds__seed0: round 3/3, accuracy ") for line in lines)
    result = recorded_cells(results_dir)["fedft-eds__seed1"]
    assert not (results_dir / CELLS_DIR / "fedft-eds__seed1" / "rounds.jsonl").exists()  # packed into the archive
    assert "fedft-rds__seed1" not in recorded_cells(results_dir)  # the failed cell
    assert result.config["seed"] == 1 and result.config["method"] == "fedft-eds" and len(result.rounds) == 3

    again = InProcessCells()
    lines.clear()
    outcome = run_experiment(experiment, results_dir, run_cell=again, echo=lines.append)
    assert again.ran == ["fedft-rds__seed1"]  # only the failed cell runs again
    assert [c.name for c in outcome.skipped] == ["fedft-eds__seed0", "fedft-eds__seed1", "fedft-rds__seed0"]
    assert lines[0] == f"3 of 4 cells already finished in {results_dir}; skipping them"
    assert not outcome.failed


def test_only_the_given_cells_run_and_the_count_is_theirs(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path))
    lines: list[str] = []
    cells = InProcessCells()
    chosen = experiment.cells[2:3]
    outcome = run_experiment(experiment, tmp_path / "out", run_cell=cells, echo=lines.append, cells=chosen)
    assert cells.ran == ["fedft-rds__seed0"] and outcome.finished == list(chosen)
    assert lines[-1].startswith("[0/1 cells] fedft-rds__seed0: round 3/3, accuracy ")


def test_unfinished_cells_leave_out_those_whose_summary_says_completed(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path))
    first, second, *rest = experiment.cells
    for cell, status in ((first, "completed"), (second, "interrupted")):
        (tmp_path / CELLS_DIR / cell.name).mkdir(parents=True)
        (tmp_path / CELLS_DIR / cell.name / "summary.json").write_text(json.dumps({"status": status}))
    assert unfinished_cells(experiment.cells, tmp_path) == (second, *rest)


def test_cell_run_config_sets_seed_folder_name_and_resume(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path))
    cell = experiment.cells[1]
    overrides = cell_run_config(cell, tmp_path / "out")
    assert overrides["seed"] == 1 and overrides["run-name"] == "fedft-eds__seed1" and overrides["resume"] is True
    assert overrides["results-dir"] == str((tmp_path / "out" / CELLS_DIR).resolve())


def test_finished_cells_made_with_other_settings_are_refused(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, seeds=[0])
    results_dir = tmp_path / "out"
    run_experiment(load_experiment(path), results_dir, run_cell=InProcessCells(), echo=lambda line: None)
    raw = yaml.safe_load(path.read_text())
    raw["base"]["local-epochs"] = 2
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(StaleResultsError, match=r"fedft-eds__seed0: local-epochs: 1 -> 2"):
        run_experiment(load_experiment(path), results_dir, run_cell=InProcessCells(), echo=lambda line: None)


def record_finished(cell, results_dir: Path, config: dict) -> None:
    """``cell`` recorded in ``results_dir`` as finished, with ``config`` as its config.json."""
    folder = results_dir / CELLS_DIR / cell.name
    folder.mkdir(parents=True)
    summary = {"status": "completed", "pretraining": {"recipe_version": RECIPE_VERSION}}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "rounds.jsonl").write_text("")
    (folder / "config.json").write_text(json.dumps(config))


def recorded_as_today(cell, results_dir: Path) -> dict:
    """The config.json the cell's run records today (what the app writes: every setting, resolved)."""
    return parse_config({**load_defaults(), **cell_run_config(cell, results_dir)}).to_dict()


def test_a_finished_cell_of_a_default_that_changed_since_is_refused(tmp_path: Path) -> None:
    """The file did not change, the app's default did: a cell recorded with another momentum, or with the pretraining
    round off where the file leaves it to its default (before the round existed), cannot share a folder with cells
    run today."""
    path = write_experiment(tmp_path, seeds=[0])
    raw = yaml.safe_load(path.read_text())
    del raw["base"]["pretrain-round"]
    path.write_text(yaml.safe_dump(raw))
    experiment, results_dir = load_experiment(path), tmp_path / "out"
    cell = experiment.cells[0]
    today = recorded_as_today(cell, results_dir)
    assert today["pretrain-round"] is True and today["momentum"] != 0.0
    record_finished(cell, results_dir, {**today, "pretrain-round": False, "momentum": 0.0})
    with pytest.raises(StaleResultsError, match=rf"{cell.name}: pretrain-round: False -> True; momentum: 0.0 -> "):
        check_finished_cells(experiment, results_dir)


def test_where_a_cell_reads_and_writes_and_settings_added_since_are_not_compared(tmp_path: Path) -> None:
    experiment, results_dir = load_experiment(write_experiment(tmp_path, seeds=[0])), tmp_path / "out"
    cell = experiment.cells[0]
    today = recorded_as_today(cell, results_dir)
    elsewhere = {"results-dir": "/elsewhere", "run-name": "other", "resume": False, "data-cache-dir": "/x"}
    before_a_setting = {k: v for k, v in today.items() if k != "temperature"}  # the cell does not set it
    record_finished(cell, results_dir, {**before_a_setting, **elsewhere})
    check_finished_cells(experiment, results_dir)
    (results_dir / CELLS_DIR / cell.name / "config.json").write_text(json.dumps({**today, "local-epochs": 9}))
    with pytest.raises(StaleResultsError, match=rf"{cell.name}: local-epochs: 9 -> 1"):
        check_finished_cells(experiment, results_dir)


def test_settings_a_cell_never_reads_are_not_compared() -> None:
    """A run that does not pretrain reads no pretraining setting, one without the round none of the round's; where a
    run reads and writes, and what it only observes, never change what it computes."""
    none = {"pretrain": "none", "pretrain-round": False}
    unread = unread_settings(none, none)
    assert {
        "pretrain-samples",
        "pretrain-epochs",
        "pretrain-round-max-epochs",
        "entropy-metrics",
        "results-dir",
    } <= unread
    pretraining = {"pretrain": "dataset", "pretrain-round": True}
    read = unread_settings(pretraining, pretraining)
    assert not {"pretrain-samples", "pretrain-epochs", "pretrain-round-max-epochs", "pretrain-round"} & read
    assert "pretrain-samples" not in unread_settings(none, pretraining)  # pretraining today: its settings count


def test_a_finished_cell_recorded_under_keys_of_before_is_named(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path, seeds=[0]))
    cell = experiment.cells[0]
    folder = tmp_path / "out" / CELLS_DIR / cell.name
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"status": "completed"}))
    (folder / "rounds.jsonl").write_text("")
    (folder / "config.json").write_text(json.dumps({**cell.overrides, "seed": 0, "proximal-mu": 0.1}))
    with pytest.raises(StaleResultsError) as raised:
        check_finished_cells(experiment, tmp_path / "out")
    assert f"{cell.name}: its config.json holds keys that are not run-config keys today: ['proximal-mu']" in str(
        raised.value
    )


def test_config_differences_compares_numbers_by_value() -> None:
    assert config_differences({"a": 0.1, "b": 1, "c": "x", "d": True}, {"a": 0.1, "b": 1.0, "c": "x", "d": True}) == []
    assert config_differences({"a": 0.1, "d": True}, {"a": 0.2, "d": False}) == ["a: 0.1 -> 0.2", "d: True -> False"]


def test_report_tables_and_figures_from_real_cells(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path))
    results_dir = tmp_path / "out"
    run_experiment(experiment, results_dir, run_cell=InProcessCells(), echo=lambda line: None)
    written = write_report(experiment, finished_results(experiment, recorded_cells(results_dir)), results_dir)
    names = sorted(p.name for p in written)
    assert names == [
        "accuracy_vs_client_seconds.png",
        "accuracy_vs_round.png",
        "class_accuracy.md",  # the cells' rounds record each class's accuracy
        "cohort_label_entropy.png",
        "entropy_histograms.png",
        "learning_efficiency.png",
        "summary.csv",
        "summary.json",
        "summary.md",
    ]
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summaries = {s: recorded_cells(results_dir)[f"fedft-eds__seed{s}"].summary for s in (0, 1)}
    assert (results_dir / ARCHIVE_FILE).is_file()
    mean_best = (summaries[0]["best_accuracy"] + summaries[1]["best_accuracy"]) / 2
    table = (results_dir / "summary.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| fedft-eds |"))
    assert row.startswith(f"| fedft-eds | 2 | {100 * mean_best:.2f} ± ")
    machine = summaries[0]["machine"]
    assert f"Computed on: {machine['cpu']}, torch {machine['torch']}, CPU kernels " in table
    assert table.count("Computed on:") == 1 and "(4 cells)." in table  # every cell on this machine
    assert (results_dir / "experiment.yaml").read_text() == experiment.path.read_text()
    record = json.loads((results_dir / "summary.json").read_text())  # what the docs' tables are generated from
    cell = next(c for c in record["cells"] if c["name"] == "fedft-eds__seed0")
    assert cell["summary"]["best_accuracy"] == summaries[0]["best_accuracy"]
    assert max(cell["rounds"]["accuracy"]) == summaries[0]["best_accuracy"]
    assert len(cell["rounds"]["accuracy"]) == summaries[0]["rounds"] and record["missing"] == []
    code = checkout_state()  # the runner recorded the commit of the code that ran each cell
    assert code is not None
    recorded_code = json.loads(recorded_cells(results_dir)["fedft-eds__seed0"].files["code.json"])
    assert recorded_code == code
    short = code["commit"][:7] + (" with uncommitted changes" if code["uncommitted_changes"] else "")
    assert cell["code"] == short and f"Computed by the code of commit: {short} (4 cells)." in table


def test_an_interrupted_cell_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    experiment = load_experiment(write_experiment(tmp_path, methods=["fedft-eds"], seeds=[0]))
    results_dir = tmp_path / "out"

    def interrupted(overrides: dict, clients: int, resources: Resources, log_file: Path) -> int:
        with pytest.raises(ServerKilled):
            run_in_process(small_run_config(Path("/nonexistent"), **overrides), num_partitions=clients, kill_at_round=3)
        raise KeyboardInterrupt  # what Ctrl-C does to the runner while the cell runs

    with pytest.raises(KeyboardInterrupt):
        run_experiment(experiment, results_dir, run_cell=interrupted, echo=lambda line: None)
    directory = results_dir / CELLS_DIR / "fedft-eds__seed0"
    assert [r["round"] for r in read_rounds(directory)] == [1, 2]

    lines: list[str] = []
    outcome = run_experiment(experiment, results_dir, run_cell=InProcessCells(), echo=lines.append)
    assert [c.name for c in outcome.finished] == ["fedft-eds__seed0"]
    assert lines[0].startswith("[0/1 cells] fedft-eds__seed0: round 3/3, accuracy ")
    assert [r["round"] for r in recorded_cells(results_dir)["fedft-eds__seed0"].rounds] == [1, 2, 3]


def test_cells_pretrained_by_another_recipe_are_stale() -> None:
    from experiments.runner import pretraining_differences
    from server_app.pretraining import RECIPE_VERSION

    assert pretraining_differences({"pretrain": "public"}, {}) == [f"pretraining recipe: 1 -> {RECIPE_VERSION}"]
    assert pretraining_differences({"pretrain": "public"}, {"pretraining": {"recipe_version": RECIPE_VERSION}}) == []
    assert pretraining_differences({"pretrain": "none"}, {}) == []


def test_an_in_process_cell_set_to_die_fails_without_killing_the_runner(tmp_path: Path) -> None:
    """``fail-partitions`` mode ``die`` kills the client's process: in-process, that would be the runner itself."""
    from simulation.in_process import run_cell_in_process

    log = tmp_path / "cell.log"
    assert run_cell_in_process({"fail-partitions": "1:die"}, 2, Resources(), log) == 1
    assert "fail-partitions 'die'" in log.read_text()


def test_an_in_process_cell_with_a_bad_fail_partitions_value_fails_naming_it(tmp_path: Path) -> None:
    from simulation.in_process import run_cell_in_process

    log = tmp_path / "cell.log"
    assert run_cell_in_process({"fail-partitions": "x:nonsense"}, 2, Resources(), log) == 1
    assert "'x:nonsense' is not 'partition:mode'" in log.read_text()
