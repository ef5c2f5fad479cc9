"""``python -m experiments report``: one small experiment's tables written from its cells, packed, and written again
from the archive byte for byte; ``--check`` says where a table is not what the cells give; a missing, truncated or
foreign archive is named and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.__main__ import main
from experiments.cell_archive import ARCHIVE_FILE, CELLS_DIR, read_archive, write_archive
from experiments.report import check_tables, finished_results
from experiments.spec import load_experiment

EXPERIMENT = {
    "name": "tiny",
    "description": "Two methods, two seeds, recorded by hand.",
    "cost": "none",
    "clients": 4,
    "base": {"dataset": "fashion-mnist-mini", "num-server-rounds": 3},
    "methods": ["fedavg", "fedprox"],
    "seeds": [0, 1],
    "compare": {"fedprox": "fedavg"},
}
TABLES = ("summary.md", "summary.csv", "summary.json", "class_accuracy.md")


def write_cell(results_dir: Path, method: str, seed: int, accuracies: list[float]) -> None:
    """A finished cell's records as the ServerApp writes them."""
    cell = results_dir / CELLS_DIR / f"{method}__seed{seed}"
    cell.mkdir(parents=True)
    config = {"method": method, "dataset": "fashion-mnist-mini", "num-server-rounds": 3, "seed": seed}
    (cell / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    rounds = [
        {
            "round": r + 1,
            "accuracy": a,
            "client_train_seconds": 1.5 + seed,
            "cohort_label_entropy": 3.0,
            "bytes_down": 1000,
            "bytes_up": 900,
            "class_accuracy": [a, 1 - a, None],
        }
        for r, a in enumerate(accuracies)
    ]
    (cell / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    summary = {
        "status": "completed",
        "initial_accuracy": 0.1,
        "best_accuracy": max(accuracies),
        "final_accuracy": accuracies[-1],
        "mean_last10_accuracy": sum(accuracies) / len(accuracies),
        "total_client_train_seconds": 3 * (1.5 + seed),
        "learning_efficiency": 100 * max(accuracies) / (3 * (1.5 + seed)),
        "total_bytes_down": 3000,
        "total_bytes_up": 2700,
        "machine": {"device": "cpu", "cpu": "a CPU", "cpu_capability": "AVX2", "torch": "2.x", "threads": 1},
    }
    (cell / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A results folder as ``run`` leaves it before packing: experiment.yaml and four finished cell folders."""
    results_dir = tmp_path / "tiny"
    results_dir.mkdir()
    (results_dir / "experiment.yaml").write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    for seed, (ours, theirs) in enumerate([([0.3, 0.5, 0.45], [0.2, 0.4, 0.42]), ([0.35, 0.6, 0.55], [0.3, 0.5, 0.5])]):
        write_cell(results_dir, "fedprox", seed, ours)
        write_cell(results_dir, "fedavg", seed, theirs)
    return results_dir


def tables(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in TABLES}


def test_packed_cells_give_the_same_tables_byte_for_byte(recorded: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(recorded)]) == 0
    from_folders = tables(recorded)
    assert "| fedprox − fedavg | 0 1 | +8.0, +10.0 |" in from_folders["summary.md"].decode()
    assert (recorded / "accuracy_vs_round.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["pack", str(recorded)]) == 0
    assert not (recorded / CELLS_DIR).exists() and len(read_archive(recorded / ARCHIVE_FILE)) == 4
    for name in TABLES:
        (recorded / name).unlink()
    assert main(["report", str(recorded)]) == 0
    assert tables(recorded) == from_folders
    capsys.readouterr()
    assert main(["report", "--check", str(recorded.parent)]) == 0  # a folder of results folders
    assert capsys.readouterr().out == f"{recorded}: every table is what its 4 finished cells give\n"


def test_check_names_a_table_that_differs_and_rewrites_nothing(recorded: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "--no-figures", str(recorded)]) == 0
    assert main(["pack", str(recorded)]) == 0
    before = tables(recorded)
    runs = read_archive(recorded / ARCHIVE_FILE)
    summary = json.loads(runs["cells/fedavg__seed1"]["summary.json"])
    runs["cells/fedavg__seed1"]["summary.json"] = json.dumps({**summary, "best_accuracy": 0.9}).encode()
    write_archive(recorded / ARCHIVE_FILE, runs)
    capsys.readouterr()
    assert main(["report", "--check", str(recorded)]) == 1
    out = capsys.readouterr().out
    assert f"{recorded / 'summary.md'}: differs from what the recorded cells give:" in out
    assert f"{recorded / 'summary.csv'}: differs" in out and "class_accuracy.md" not in out
    assert "-| fedavg | 2 | 46.00 ± 5.66 |" in out and "+| fedavg | 2 | 66.00 ± 33.94 |" in out
    assert tables(recorded) == before
    experiment = load_experiment(recorded / "experiment.yaml")
    (recorded / "class_accuracy.md").unlink()
    problems = check_tables(experiment, finished_results(experiment, {}), recorded)
    assert problems[0].startswith(f"{recorded / 'summary.md'}: differs")  # no cells: every row missing


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.unlink(), "missing, and {cells} holds no finished cell"),
        (lambda path: path.write_bytes(path.read_bytes()[:-40]), "truncated"),
        (lambda path: path.write_bytes(b"PK\x03\x04 a zip file"), "damaged, or not an xz file"),
    ],
    ids=["missing", "truncated", "another format"],
)
def test_a_bad_archive_is_named_and_no_table_is_rewritten(
    recorded: Path, capsys: pytest.CaptureFixture, damage, message: str
) -> None:
    assert main(["report", "--no-figures", str(recorded)]) == 0
    assert main(["pack", str(recorded)]) == 0
    before = tables(recorded)
    damage(recorded / ARCHIVE_FILE)
    capsys.readouterr()
    for command in (["report", str(recorded)], ["report", "--check", str(recorded)]):
        assert main(command) == 2
        assert f"error: {recorded / ARCHIVE_FILE}: {message.format(cells=recorded / CELLS_DIR)}" in (
            capsys.readouterr().err
        )
    assert tables(recorded) == before


def test_a_cell_recorded_under_keys_of_before_is_named(recorded: Path, capsys: pytest.CaptureFixture) -> None:
    config = recorded / CELLS_DIR / "fedprox__seed0" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "proximal-mu": 0.01}))
    for command in (["report", "--no-figures", str(recorded)], ["report", "--check", str(recorded)]):
        assert main(command) == 2
        assert (
            f"error: {recorded}: cell fedprox__seed0: its config.json holds keys that are not run-config keys today, "
            "['proximal-mu']: record it again under today's keys"
        ) in capsys.readouterr().err
    assert not (recorded / "summary.md").exists()  # nothing written from the cells it could read


def test_the_classes_view_prints_and_writes_nothing(recorded: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(recorded), "--classes", "1", "--pair", "fedprox=fedavg"]) == 0
    out = capsys.readouterr().out
    assert "| cell | model | all | class 1 | mean of classes 0,2 |" in out
    assert "| fedprox − fedavg | seed 0 | 55.0 | 58.0 | -3.0 |" in out  # the final round's class 1: 1 − accuracy
    assert not (recorded / "summary.md").exists()
    assert main(["report", str(recorded), "--classes", "1", "--pair", "fedprox=fedsgd"]) == 2
    assert (
        f"--pair fedprox=fedsgd: 'fedsgd' is not a method of {recorded / 'experiment.yaml'}" in capsys.readouterr().err
    )


def test_a_results_dir_goes_with_one_experiment_file_only(recorded: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(recorded), "--results-dir", str(recorded)]) == 2
    assert "--results-dir goes with one experiment file" in capsys.readouterr().err
    assert main(["report", "--no-figures", str(recorded / "experiment.yaml"), "--results-dir", str(recorded)]) == 0
    assert (recorded / "summary.md").is_file()
    assert main(["report", str(recorded / CELLS_DIR)]) == 2  # neither a file nor a folder of results folders
    assert f"{recorded / CELLS_DIR}: holds no experiment.yaml, and no folder inside it does" in capsys.readouterr().err
