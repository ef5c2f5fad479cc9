"""accuracy.png in a run folder: written from rounds.jsonl records, None without matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from server_app.run_plot import PLOT_FILE, run_plot_figure, write_run_plot


def records(seconds: list[float], accuracy: list[float], skipped: tuple[int, ...] = ()) -> list[dict]:
    return [
        {"round": i + 1, "accuracy": a, "client_train_seconds": s, "aggregated": i + 1 not in skipped}
        for i, (s, a) in enumerate(zip(seconds, accuracy))
    ]


def line(ax, label: str):
    return next(line for line in ax.get_lines() if line.get_label().startswith(label))


def test_the_plot_is_written_into_the_run_folder(tmp_path: Path) -> None:
    path = write_run_plot(tmp_path, records([2.0, 2.0, 2.0], [0.5, 0.6, 0.7]), initial_accuracy=0.4)
    assert path == tmp_path / PLOT_FILE
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_without_matplotlib_no_plot_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib` now raises ImportError
    assert write_run_plot(tmp_path, records([2.0], [0.5]), initial_accuracy=0.4) is None
    assert not (tmp_path / PLOT_FILE).exists()


def test_nothing_to_plot_writes_nothing(tmp_path: Path) -> None:
    assert write_run_plot(tmp_path, [], initial_accuracy=None) is None
    assert not (tmp_path / PLOT_FILE).exists()


def test_the_initial_model_starts_both_curves_at_round_0_and_0_seconds() -> None:
    by_round, by_seconds = run_plot_figure(records([2.0, 3.0], [0.5, 0.6]), initial_accuracy=0.4).axes
    assert list(line(by_round, "after round").get_xdata()) == [0, 1, 2]
    assert list(line(by_round, "after round").get_ydata()) == pytest.approx([40.0, 50.0, 60.0])
    assert list(line(by_seconds, "after round").get_xdata()) == [0.0, 2.0, 5.0]
    star = line(by_seconds, "initial model")
    assert star.get_label() == "initial model: 40.0% (round 0, 0 s)"
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([0.0], [40.0])


def test_skipped_rounds_are_marked() -> None:
    by_round, _ = run_plot_figure(records([2.0, 0.0, 2.0], [0.5, 0.5, 0.6], skipped=(2,)), 0.4).axes
    crosses = line(by_round, "skipped round")
    assert list(crosses.get_xdata()) == [2] and list(crosses.get_ydata()) == [50.0]


def test_seconds_spanning_decades_get_a_log_axis_that_keeps_0() -> None:
    _, wide = run_plot_figure(records([1.0, 50.0, 50.0], [0.5, 0.6, 0.7]), 0.4).axes
    _, narrow = run_plot_figure(records([2.0, 2.0, 2.0], [0.5, 0.6, 0.7]), 0.4).axes
    assert wide.get_xscale() == "symlog" and "log scale" in wide.get_xlabel()
    assert 0.0 in list(wide.get_xticks()) and wide.get_xlim()[0] < 0.0
    assert narrow.get_xscale() == "linear"


def test_the_figure_is_titled_with_method_dataset_split_and_start() -> None:
    from server_app.results import run_title
    from tests.conftest import make_config

    config = make_config(method="fedft-eds", pretrain="dataset", pretrain_dataset="mnist", dirichlet_alpha=0.1)
    title = run_title(config, config.method)
    assert (
        title
        == "fedft-eds on fashion-mnist-mini, Dir(0.1) split; wrn-16-1 pretrained on mnist, then a pretraining round"
    )
    figure = run_plot_figure(records([2.0], [0.5]), 0.4, title)
    assert figure.get_suptitle() == title
    iid = make_config(partitioner="iid", client_selection="fedentopt", fraction_train=0.3, pretrain="none")
    assert run_title(iid, "fedavg") == (
        "fedavg on fashion-mnist-mini, IID split, FedEntOpt selection; wrn-16-1 from random weights"
    )
