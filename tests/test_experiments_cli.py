"""``python -m experiments``: errors before any run, and one real two-cell experiment in Flower's simulation."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from experiments.__main__ import main
from simulation.local_run import PROJECT_DIR, processes_marked

MARKER = "FEDFT_EXPERIMENTS_TEST"


def test_a_malformed_file_fails_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"description": "d", "cost": "c", "methods": ["fedavg"], "grid": {"lr": [0.1]}}))
    assert main(["run", str(path), "--results-dir", str(tmp_path / "out")]) == 2
    assert f"error: {path}: 'grid.lr' is not a run-config key; docs/configuration.md lists every key" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


def test_check_lists_the_cells(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check", str(PROJECT_DIR / "experiments" / "smoke.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == ["  fedft-eds__dirichlet-alpha=0.1__seed0", "  fedft-rds__dirichlet-alpha=0.1__seed0"]


def test_check_only_lists_the_matching_cells(capsys: pytest.CaptureFixture) -> None:
    assert main(["check", str(PROJECT_DIR / "experiments" / "smoke.yaml"), "--only", "*-rds__*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{PROJECT_DIR / 'experiments' / 'smoke.yaml'}: 1 cells,")
    assert lines[1:] == ["  fedft-rds__dirichlet-alpha=0.1__seed0"]


def _unsplittable(tmp_path: Path) -> Path:
    """Two cells whose Dir(0.1) split of the synthetic set's 640 samples over 40 clients, at least 10 each, is never
    drawn; a third that can be."""
    path = tmp_path / "unsplittable.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "d",
                "cost": "c",
                "clients": 40,
                "base": {"dataset": "synthetic", "dirichlet-alpha": 0.1},
                "methods": {"fedavg": {"method": "fedavg"}},
                "grid": {"min-partition-size": [10, 11, 0]},
            }
        )
    )
    return path


def test_check_fails_naming_the_cells_whose_split_cannot_be_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = _unsplittable(tmp_path)
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    errors = captured.err.splitlines()
    assert len(errors) == 2 and all(e.startswith(f"error: {path}: cell fedavg__min-partition-size=1") for e in errors)
    assert errors[0].startswith(
        f"error: {path}: cell fedavg__min-partition-size=10__seed0: run config: cannot split 640 samples over 40 "
        "clients with dirichlet (dirichlet-alpha = 0.1, min-partition-size = 10): "
    )
    assert len(captured.out.splitlines()) == 4  # the cells are still listed


def test_run_with_a_cell_whose_split_cannot_be_drawn_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = _unsplittable(tmp_path)
    assert main(["run", str(path), "--in-process", "--results-dir", str(tmp_path / "out")]) == 2
    assert "min-partition-size = 11" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_run_only_with_a_pattern_that_matches_nothing_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = PROJECT_DIR / "experiments" / "smoke.yaml"
    assert main(["run", str(path), "--only", "fedavg*", "--results-dir", str(tmp_path / "out")]) == 2
    assert f"error: {path}: --only 'fedavg*' matches no cell" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
@pytest.mark.slow_e2e
def test_run_two_cells_in_simulation_then_skip_them(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "two methods, two rounds",
                "cost": "about a minute",
                "clients": 3,
                "base": {
                    "dataset": "synthetic",
                    "model": "lenet5",
                    "pretrain-epochs": 2,
                    "pretrain-samples": 600,
                    "num-server-rounds": 2,
                    "local-epochs": 1,
                    "min-partition-size": 5,
                    "node-wait-seconds": 60.0,
                    "pretrain-cache-dir": str(tmp_path / "pretrained"),
                    "feature-cache-dir": str(tmp_path / "features"),
                },
                "methods": ["fedft-eds", "fedavg"],
            }
        )
    )
    out = tmp_path / "out"
    marker = uuid.uuid4().hex

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "experiments", "run", str(path), "--results-dir", str(out)],
            cwd=PROJECT_DIR,
            env={**os.environ, MARKER: marker},
            capture_output=True,
            text=True,
            timeout=400,
        )

    first = run()
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert processes_marked(marker, variable=MARKER) == [], "a SuperLink or Ray process was left running"
    assert "[0/2 cells] fedft-eds__seed0: round 2/2, accuracy " in first.stdout
    assert "[1/2 cells] fedavg__seed0: round 2/2, accuracy " in first.stdout
    table = (out / "summary.md").read_text()
    assert "| fedft-eds | 1 |" in table and "| fedavg | 1 |" in table
    assert {p.name for p in out.glob("*.png")} == {
        "accuracy_vs_round.png",
        "accuracy_vs_client_seconds.png",
        "learning_efficiency.png",
        "cohort_label_entropy.png",
    }
    second = run()
    assert second.returncode == 0
    assert f"2 of 2 cells already finished in {out}; skipping them" in second.stdout
    assert not [line for line in second.stdout.splitlines() if line.startswith("[")]  # no cell ran
