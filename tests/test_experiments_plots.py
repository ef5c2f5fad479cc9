"""Experiment figures: one colour per method everywhere, "not run" marked, bars labelled, the initial model
as the start of the accuracy curves, a log client-seconds axis."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer

from experiments.cell_results import CellResult
from experiments.method_styles import method_styles
from experiments.paired import paired_curves
from experiments.plots import (
    NOT_RUN,
    accuracy_figure,
    cohort_entropy_figure,
    learning_efficiency_figure,
    mean_curves,
    paired_rounds_figure,
    planned,
)
from experiments.spec import parse_experiment
from experiments.summary import summarise

METHODS = ["fedavg", "fedft-eds", "fedft-rds"]


def experiment():
    raw = {
        "description": "d",
        "cost": "c",
        "methods": METHODS,
        "grid": {"dirichlet-alpha": [0.1, 0.5]},
        "seeds": [0, 1],
    }
    return parse_experiment(raw, Path("exp.yaml"))


def result(seconds: float, accuracy: list[float], initial: float = 0.4) -> CellResult:
    rounds = [
        {"round": i + 1, "accuracy": a, "client_train_seconds": seconds, "cohort_label_entropy": 3.0}
        for i, a in enumerate(accuracy)
    ]
    summary = {
        "initial_accuracy": initial,
        "best_accuracy": max(accuracy),
        "learning_efficiency": 100 * max(accuracy) / (seconds * len(accuracy)),
        "total_client_train_seconds": seconds * len(accuracy),
    }
    return CellResult(summary, rounds, {"dataset": "fashion-mnist-mini"})


def results():
    """α=0.1: every method, both seeds; α=0.5: fedft-rds (seed 0 only) and fedft-eds, in that order; no fedavg."""
    cells = {(c.method, dict(c.point)["dirichlet-alpha"], c.seed): c for c in experiment().cells}
    return {
        cells["fedavg", 0.1, 0]: result(100.0, [0.5, 0.6], initial=0.1),
        cells["fedavg", 0.1, 1]: result(100.0, [0.5, 0.6], initial=0.1),
        cells["fedft-eds", 0.1, 0]: result(2.0, [0.6, 0.7]),
        cells["fedft-eds", 0.1, 1]: result(2.0, [0.6, 0.7]),
        cells["fedft-rds", 0.1, 0]: result(1.0, [0.6, 0.65]),
        cells["fedft-rds", 0.1, 1]: result(1.0, [0.6, 0.65]),
        cells["fedft-rds", 0.5, 0]: result(1.0, [0.7, 0.75]),
        cells["fedft-eds", 0.5, 0]: result(2.0, [0.7, 0.8]),
        cells["fedft-eds", 0.5, 1]: result(2.0, [0.7, 0.8]),
    }


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def colours(ax) -> dict[str, str]:
    """Method -> colour of its curves or bars in one panel (one colour each, or the method appears twice)."""
    pairs = [(line.get_label(), line.get_color()) for line in ax.get_lines()]
    pairs += [
        (bars.get_label(), bars.patches[0].get_facecolor()) for bars in ax.containers if isinstance(bars, BarContainer)
    ]
    drawn: dict[str, set[str]] = {}
    for label, colour in pairs:
        if not label.startswith("_"):
            drawn.setdefault(label, set()).add(to_hex(colour))
    assert all(len(c) == 1 for c in drawn.values()), drawn
    return {label: c.pop() for label, c in drawn.items()}


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_styles_follow_the_file_order_not_the_subset() -> None:
    everything = method_styles(["a", "b", "c", "d"])
    assert len({s.colour for s in everything.values()}) == 4
    assert len({(s.colour, s.marker) for s in method_styles([f"m{i}" for i in range(70)]).values()}) == 70
    assert method_styles(["a", "b", "c", "d"])["c"] == everything["c"]


def test_a_method_has_one_colour_in_every_panel_and_figure() -> None:
    curves, plan = mean_curves(experiment(), results()), planned(experiment())
    expected = {m: s.colour for m, s in method_styles(METHODS).items()}
    rows = summarise(experiment(), results())
    figures = [
        accuracy_figure(curves, plan),
        accuracy_figure(curves, plan, against_seconds=True),
        cohort_entropy_figure(curves, plan, 10),
    ]
    panels = [ax for figure in figures for ax in figure.axes[:2]]
    bars = learning_efficiency_figure(rows, plan).axes[0]
    for ax in [*panels, bars]:
        drawn = colours(ax)
        assert drawn and all(drawn[m] == expected[m] for m in drawn)
    assert {m for m in colours(panels[1])} == {"fedft-eds", "fedft-rds"}  # α=0.5 draws a subset, other order


def test_methods_without_results_are_marked_not_run() -> None:
    curves, plan = mean_curves(experiment(), results()), planned(experiment())
    figure = accuracy_figure(curves, plan)
    first, second = figure.axes[:2]
    assert first.get_title() == "dirichlet-alpha=0.1"
    assert second.get_title() == f"dirichlet-alpha=0.5\n{NOT_RUN}: fedavg"
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend[:3] == METHODS  # fedavg ran at α=0.1, so it is in the figure
    bars = learning_efficiency_figure(summarise(experiment(), results()), plan).axes[0]
    assert texts(bars).count(NOT_RUN) == 1


def test_a_grid_point_without_any_result_is_a_not_run_panel() -> None:
    only_first = {c: r for c, r in results().items() if dict(c.point)["dirichlet-alpha"] == 0.1}
    figure = accuracy_figure(mean_curves(experiment(), only_first), planned(experiment()))
    assert texts(figure.axes[1]) == [NOT_RUN] and figure.axes[1].get_visible()


def test_bars_carry_their_values_and_partial_seed_counts() -> None:
    rows = summarise(experiment(), results())
    ax = learning_efficiency_figure(rows, planned(experiment())).axes[0]
    labels = texts(ax)
    fedavg = next(r for r in rows if r.method == "fedavg").stats["learning_efficiency"][0]
    assert f"{fedavg:.3g}" in labels
    rds = next(r for r in rows if r.method == "fedft-rds" and r.point_label == "dirichlet-alpha=0.5")
    assert f"{rds.stats['learning_efficiency'][0]:.3g}\n(1/2)" in labels
    assert len([t for t in labels if t != NOT_RUN]) == 5
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.5"] and ax.get_xlabel() == "dirichlet-alpha"
    assert ax.get_yscale() == "log"  # FedFT's bars are far over a decade above FedAvg's


def test_accuracy_curves_start_at_the_initial_model_on_a_log_seconds_axis() -> None:
    curves, plan = mean_curves(experiment(), results()), planned(experiment())
    by_round = accuracy_figure(curves, plan).axes[0]
    fedavg = next(line for line in by_round.get_lines() if line.get_label() == "fedavg")
    assert list(fedavg.get_xdata())[:2] == [0, 1] and list(fedavg.get_ydata())[:2] == pytest.approx([10.0, 50.0])
    by_seconds = accuracy_figure(curves, plan, against_seconds=True).axes[0]
    eds = next(line for line in by_seconds.get_lines() if line.get_label() == "fedft-eds")
    assert list(eds.get_xdata()) == [0.0, 2.0, 4.0]
    assert by_seconds.get_xscale() == "symlog" and by_seconds.get_xlim()[0] < 0.0


def test_a_curve_covered_by_an_equal_one_says_so_in_the_legend() -> None:
    curves, plan = mean_curves(experiment(), results()), planned(experiment())
    legend = [t.get_text() for t in cohort_entropy_figure(curves, plan, 10).legends[0].get_texts()]
    assert legend[:3] == ["fedavg (under fedft-rds)", "fedft-eds (under fedft-rds)", "fedft-rds"]  # all 3.0 bits
    accuracy_legend = [t.get_text() for t in accuracy_figure(curves, plan).legends[0].get_texts()]
    assert accuracy_legend[:3] == METHODS  # different accuracies: nothing covered


def test_curves_flattened_by_a_run_from_scratch_get_a_zoomed_panel() -> None:
    methods = {"scratch": {"method": "fedavg", "pretrain": "none"}, "fedft-eds": {}}
    one = parse_experiment({"description": "d", "cost": "c", "methods": methods}, Path("exp.yaml"))
    scratch, fedft = one.cells
    cells = {scratch: result(100.0, [0.4, 0.8], initial=0.1), fedft: result(1.0, [0.85, 0.86], initial=0.84)}
    curves = mean_curves(one, cells)
    figure = accuracy_figure(curves, planned(one))
    full, zoom = figure.axes
    assert full.get_title() == "all cells" and zoom.get_title() == "all cells\nzoom on fedft-eds"
    low, high = zoom.get_ylim()
    assert 80 < low < 84 and 86 < high < 90  # FedFT's 84–86%, the climb from 10% left out


def test_a_run_without_a_learning_efficiency_is_not_called_not_run() -> None:
    cells = results()
    first = next(iter(cells))
    cells[first] = CellResult({**cells[first].summary, "learning_efficiency": None}, cells[first].rounds, {})
    ax = learning_efficiency_figure(summarise(experiment(), cells), planned(experiment())).axes[0]
    assert texts(ax).count("no value") == 0  # the other fedavg seed still has one
    for cell in [c for c in cells if c.method == "fedavg"]:
        cells[cell] = CellResult({**cells[cell].summary, "learning_efficiency": None}, cells[cell].rounds, {})
    ax = learning_efficiency_figure(summarise(experiment(), cells), planned(experiment())).axes[0]
    assert texts(ax).count("no value") == 1 and texts(ax).count(NOT_RUN) == 1


def test_a_composed_model_is_drawn_dashed_at_the_rounds_it_was_judged_and_named_in_the_legend() -> None:
    methods = {"fedavg": {}, "fedsplit-all": {}}
    one = parse_experiment({"description": "d", "cost": "c", "methods": methods, "seeds": [0, 1]}, Path("x.yaml"))
    cells = {cell: result(10.0, [0.5, 0.6, 0.7]) for cell in one.cells}
    for cell, composed in zip(
        [c for c in one.cells if c.method == "fedsplit-all"], ([None, 0.8, 0.9], [None, 0.6, 0.8])
    ):
        for record, value in zip(cells[cell].rounds, composed):
            record["composed_accuracy"] = value
    figure = accuracy_figure(mean_curves(one, cells), planned(one))
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    (line,) = dashed  # FedSplit's alone: FedAvg has no composed model
    assert list(line.get_xdata()) == [2, 3] and list(line.get_ydata()) == pytest.approx([70.0, 85.0])
    assert to_hex(line.get_color()) == colours(figure.axes[0])["fedsplit-all"]
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend[-1].startswith("dashed: the method's")
    plain = accuracy_figure(mean_curves(experiment(), results()), planned(experiment()))
    assert not any(t.get_text().startswith("dashed") for t in plain.legends[0].get_texts())


def test_every_experiment_figure_is_titled_with_the_experiment_dataset_and_split():
    from experiments.plots import experiment_title, planned
    from experiments.spec import parse_experiment

    raw = {"name": "demo", "description": "d", "cost": "c", "clients": 20, "methods": ["fedavg"], "base": {}}
    title = planned(parse_experiment(raw, Path("x.yaml"))).title
    assert title == "demo: fashion-mnist-mini, Dir(0.1) split, 20 clients"
    varied = parse_experiment({**raw, "grid": {"dirichlet-alpha": [0.1, 0.5]}}, Path("x.yaml"))
    assert experiment_title(varied) == "demo: fashion-mnist-mini, split by dirichlet-alpha, 20 clients"


def test_each_start_is_named_beside_it() -> None:
    """α=0.1: FedAvg starts at 10%, the FedFT methods at 40%; each value is written once."""
    axes = accuracy_figure(mean_curves(experiment(), results()), planned(experiment())).axes[0]
    assert sorted(t for t in texts(axes) if t.startswith("start")) == ["start 10.0%", "start 40.0%"]


def test_the_paired_figure_draws_each_pair_round_by_round_with_the_zero_line() -> None:
    raw = {"description": "d", "cost": "c", "methods": METHODS, "seeds": [0, 1]}
    raw |= {"grid": {"dirichlet-alpha": [0.1, 0.5]}, "compare": {"fedft-eds": "fedft-rds"}}
    exp = parse_experiment(raw, Path("exp.yaml"))
    figure = paired_rounds_figure(paired_curves(exp, results()), planned(exp))
    low, high = figure.axes[0], figure.axes[1]
    [line] = [line for line in low.get_lines() if line.get_label().startswith("fedft-eds")]
    assert line.get_label() == "fedft-eds − fedft-rds (2 seeds)"
    assert list(line.get_xdata()) == [1, 2] and list(line.get_ydata()) == pytest.approx([0.0, 5.0])
    assert any(list(line.get_ydata()) == [0.0, 0.0] for line in low.get_lines() if line.get_label().startswith("_"))
    [line] = [line for line in high.get_lines() if line.get_label().startswith("fedft-eds")]
    assert line.get_label() == "fedft-eds − fedft-rds (1 seed)" and list(line.get_ydata()) == pytest.approx([0.0, 5.0])
