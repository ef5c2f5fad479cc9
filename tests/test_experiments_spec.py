"""Experiment files: validation errors name the file, the key and what is allowed; cells expand in order."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.spec import ExperimentFileError, load_experiment, parse_experiment, select_cells
from methods.registry import METHODS

EXPERIMENTS = sorted((Path(__file__).resolve().parents[1] / "experiments").glob("*.yaml"))
VALID = {
    "description": "d",
    "cost": "1 min",
    "base": {"dataset": "fashion-mnist-mini", "num-server-rounds": 2},
    "methods": ["fedft-eds", "fedft-rds"],
    "grid": {"dirichlet-alpha": [0.1, 0.5], "temperature": [0.1]},
    "seeds": [0, 1],
}


def parse(**changes):
    raw = {**VALID, **changes}
    return parse_experiment({k: v for k, v in raw.items() if v is not ...}, Path("exp.yaml"))


def error(**changes) -> str:
    with pytest.raises(ExperimentFileError) as caught:
        parse(**changes)
    return str(caught.value)


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_every_shipped_experiment_file_is_valid_and_states_its_cost(path: Path) -> None:
    experiment = load_experiment(path)
    assert experiment.cost.strip() and experiment.description.strip() and experiment.cells


def test_cells_are_grid_points_times_methods_times_seeds_in_file_order() -> None:
    experiment = parse()
    assert [c.name for c in experiment.cells] == [
        f"{m}__dirichlet-alpha={a}__temperature=0.1__seed{s}"
        for a in (0.1, 0.5)
        for m in ("fedft-eds", "fedft-rds")
        for s in (0, 1)
    ]
    cell = experiment.cells[2]
    assert cell.overrides == {
        "dataset": "fashion-mnist-mini",
        "num-server-rounds": 2,
        "dirichlet-alpha": 0.1,
        "temperature": 0.1,
        "method": "fedft-rds",
    }
    assert cell.point_label == "dirichlet-alpha=0.1, temperature=0.1"


def test_method_mapping_labels_and_precedence_method_over_grid_over_base() -> None:
    experiment = parse(
        methods={"eds-50": {"method": "fedft-eds", "selection-fraction": 0.5, "dirichlet-alpha": 1.0}, "fedavg": {}},
        grid={"dirichlet-alpha": [0.1]},
        seeds=[3],
    )
    eds, fedavg = experiment.cells
    assert eds.name == "eds-50__dirichlet-alpha=0.1__seed3"
    assert eds.overrides["dirichlet-alpha"] == 1.0 and eds.overrides["selection-fraction"] == 0.5
    assert fedavg.overrides["method"] == "fedavg" and fedavg.overrides["dirichlet-alpha"] == 0.1


def test_no_grid_gives_one_point_and_default_seed() -> None:
    experiment = parse(grid=..., seeds=...)
    assert [c.name for c in experiment.cells] == ["fedft-eds__seed0", "fedft-rds__seed0"]


def test_unknown_top_level_key() -> None:
    message = error(rounds=3)
    assert message.startswith("exp.yaml: 'rounds' is not an experiment key; allowed: name, description")


def test_unknown_run_config_key_in_grid_names_the_closest_keys() -> None:
    message = error(grid={"dirichlet-alpa": [0.1]})
    assert "exp.yaml: 'grid.dirichlet-alpa' is not a run-config key; did you mean 'dirichlet-alpha'?" in message


def test_unknown_run_config_key_in_base() -> None:
    assert "'base.rounds' is not a run-config key" in error(base={"rounds": 3})


def test_wrong_type_of_section() -> None:
    assert error(seeds="0") == "exp.yaml: 'seeds' must be a list, got str '0'"
    assert error(grid={"dirichlet-alpha": 0.1}) == "exp.yaml: 'grid.dirichlet-alpha' must be a list, got float 0.1"
    assert error(clients="ten") == "exp.yaml: 'clients' must be an integer, got str 'ten'"


def test_wrong_type_of_a_run_config_value_names_the_cell_and_key() -> None:
    message = error(grid={"num-server-rounds": ["three"]})
    assert (
        "exp.yaml: cell fedft-eds__num-server-rounds=three__seed0: run config 'num-server-rounds' must be of type int"
        in message
    )


def test_invalid_run_config_value_is_caught_before_any_run() -> None:
    message = error(grid={"temperature": [0.1, -1.0]})
    assert "run config 'temperature' = -1.0 is invalid: it must be > 0" in message


def test_empty_grid_and_empty_lists() -> None:
    assert error(grid={}) == "exp.yaml: 'grid' is empty; give run-config key -> list of values, or leave 'grid' out"
    assert error(grid={"temperature": []}) == "exp.yaml: 'grid.temperature' is an empty list; give at least one value"
    assert error(seeds=[]) == "exp.yaml: 'seeds' is an empty list; give at least one seed"
    assert error(methods=[]).startswith("exp.yaml: 'methods' is empty; list at least one of fedat, fedavg, fedavg-rds")


def test_unknown_method() -> None:
    assert error(methods=["fedsgd"]) == (
        "exp.yaml: 'methods.fedsgd' is not a method preset and sets no 'method'; presets: " + ", ".join(METHODS)
    )
    assert ", ".join(METHODS).startswith("fedat, fedavg, fedavg-rds, fedfsc")  # the registry's order: by module
    assert "'methods.mine.method' = 'fedsgd' is unknown; allowed: fedat, fedavg" in error(
        methods={"mine": {"method": "fedsgd"}}
    )


def test_keys_the_runner_owns_are_refused() -> None:
    assert (
        error(base={"seed": 1}) == "exp.yaml: 'base.seed' is set by the runner for every cell; list seeds under 'seeds'"
    )
    assert "'grid.run-name' is set by the runner" in error(grid={"run-name": ["a"]})


def test_missing_required_key() -> None:
    assert error(cost=...) == "exp.yaml: 'cost' is missing: how long it takes, and on what machine"


def test_histogram_section_is_checked() -> None:
    assert "'entropy-histogram.temperatures[1]' must be > 0, got 0" in error(
        **{"entropy-histogram": {"temperatures": [0.1, 0]}}
    )
    assert "'entropy-histogram.method' = 'fedavg' is not a method of this file; allowed: fedft-eds, fedft-rds" in error(
        **{"entropy-histogram": {"temperatures": [0.1], "method": "fedavg"}}
    )
    experiment = parse(**{"entropy-histogram": {"temperatures": [0.1, 1]}})
    assert experiment.histogram.temperatures == (0.1, 1.0) and experiment.histogram.method == "fedft-eds"


def test_file_level_errors(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    with pytest.raises(ExperimentFileError, match="none.yaml: cannot be read"):
        load_experiment(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("methods: [fedavg\n")
    with pytest.raises(ExperimentFileError, match="broken.yaml: is not valid YAML"):
        load_experiment(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump(["fedavg"]))
    with pytest.raises(ExperimentFileError, match="list.yaml: the file must be a YAML mapping"):
        load_experiment(listed)


def test_select_cells_keeps_file_order_and_matches_any_pattern() -> None:
    cells = parse().cells
    chosen = select_cells(cells, ("*__seed1", "fedft-eds__dirichlet-alpha=0.5*"))
    assert [c.name for c in chosen] == [
        "fedft-eds__dirichlet-alpha=0.1__temperature=0.1__seed1",
        "fedft-rds__dirichlet-alpha=0.1__temperature=0.1__seed1",
        "fedft-eds__dirichlet-alpha=0.5__temperature=0.1__seed0",
        "fedft-eds__dirichlet-alpha=0.5__temperature=0.1__seed1",
        "fedft-rds__dirichlet-alpha=0.5__temperature=0.1__seed1",
    ]
    assert select_cells(cells, ()) == cells


def test_select_cells_refuses_a_pattern_that_matches_nothing() -> None:
    with pytest.raises(
        ValueError,
        match=r"--only 'fedft-eds__seed0' matches no cell; cells are named "
        r"<method>__<key>=<value>__seed<n>, e\.g\. fedft-eds__dirichlet-alpha=0\.1",
    ):
        select_cells(parse().cells, ("fedft-*", "fedft-eds__seed0"))


def test_a_grid_value_that_makes_an_unsafe_cell_folder_name_is_refused() -> None:
    message = error(grid={"data-dir": ["/data/x"]}, methods=["fedft-eds"], seeds=[0])
    assert message == (
        "exp.yaml: cell 'fedft-eds__data-dir=/data/x__seed0': its folder name (method label, grid "
        "values, seed) may hold only letters, digits, '-', '_', '.', '=' and '+', not '/' (it names "
        "one folder, never a path)"
    )


@pytest.mark.parametrize("name", ["../outside", "/abs", ".hidden", "with space"])
def test_an_unsafe_experiment_name_is_refused(name: str) -> None:
    assert error(name=name).startswith(f"exp.yaml: 'name' = {name!r} names the results folder and ")


def test_a_file_whose_stem_is_no_safe_name_must_set_one() -> None:
    with pytest.raises(ExperimentFileError, match=r"'name' = 'my exp' names the results folder and .*; set 'name'"):
        parse_experiment(VALID, Path("my exp.yaml"))
    assert parse_experiment({**VALID, "name": "my-exp"}, Path("my exp.yaml")).name == "my-exp"


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("name: twice\nmethods: [fedavg]\nbase:\n  public-fraction: 0.1\n  public-fraction: 0.0\n")
    with pytest.raises(ExperimentFileError, match="key 'public-fraction' is given twice in one mapping"):
        load_experiment(path)
