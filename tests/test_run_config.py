"""Configuration: the defaults parse, bad values are refused naming the key, the docs list every key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from methods.registry import CATALOGUE, parse_config
from run_config import ConfigError, all_settings
from run_config.defaults import PYPROJECT, markdown_table, pyproject_config
from run_config.parsing import default_values

SETTINGS = all_settings(CATALOGUE)

SETTINGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_defaults_parse_to_fedft_eds(defaults: dict) -> None:
    config = parse_config(defaults)
    assert config.dataset == "fashion-mnist-mini" and config.method == "fedft-eds"
    resolved = {
        "freeze": "mid",
        "data-selection": "entropy",
        "selection-fraction": 0.1,
        "objective": "plain",
        "pretrain": "dataset",
        "pretrain-round": True,
        "model": "wrn-16-1",
        "fraction-train": 1.0,
        "learning-rate": 0.1,
    }
    assert config.to_dict() == {**defaults, **resolved}


@pytest.mark.parametrize(("method", "learning_rate"), [("fedavg", 0.1), ("scaffold", 0.03), ("fedmd", 0.01)])
def test_the_learning_rate_is_the_methods_unless_given(defaults: dict, method: str, learning_rate: float) -> None:
    """SCAFFOLD and FedMD do not learn at the app's 0.1 (docs/methods/scaffold.md, docs/methods/fedmd.md)."""
    defaults["method"] = method
    assert parse_config(defaults).learning_rate == learning_rate
    defaults["learning-rate"] = 0.2
    assert parse_config(defaults).learning_rate == 0.2


@pytest.mark.parametrize(
    ("method", "freeze", "selection", "fraction", "objective"),
    [
        ("fedavg", "none", "all", 1.0, "plain"),
        ("fedprox", "none", "all", 1.0, "proximal"),
        ("fedavg-rds", "none", "random", 0.1, "plain"),
        ("fedprox-rds", "none", "random", 0.1, "proximal"),
        ("fedft-all", "mid", "all", 1.0, "plain"),
        ("fedft-rds", "mid", "random", 0.1, "plain"),
        ("fedft-eds", "mid", "entropy", 0.1, "plain"),
    ],
)
def test_method_presets(
    defaults: dict, method: str, freeze: str, selection: str, fraction: float, objective: str
) -> None:
    defaults["method"] = method
    config = parse_config(defaults)
    assert (config.freeze, config.data_selection, config.selection_fraction, config.objective) == (
        freeze,
        selection,
        fraction,
        objective,
    )


def test_explicit_values_override_the_preset(defaults: dict) -> None:
    defaults.update({"method": "fedft-eds", "selection-fraction": 0.5, "freeze": "up", "objective": "proximal"})
    config = parse_config(defaults)
    assert (config.selection_fraction, config.freeze, config.objective, config.data_selection) == (
        0.5,
        "up",
        "proximal",
        "entropy",
    )


def test_every_setting_is_declared_once_and_pyproject_holds_the_declared_defaults(defaults: dict) -> None:
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys)), "a key declared twice"
    assert defaults == default_values(CATALOGUE)  # regenerate with python -m scripts.update_settings
    assert pyproject_config(CATALOGUE) in PYPROJECT.read_text()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("dataset", "imagenet", "'dataset' = 'imagenet' is invalid: it must be one of"),
        ("model", "resnet50", "'model' = 'resnet50' is invalid"),
        ("partitioner", "shards", "'partitioner' = 'shards' is invalid"),
        ("fraction-train", 0.0, "'fraction-train' = 0.0 is invalid: it must be in (0, 1]"),
        ("fraction-train", 1.5, "'fraction-train' = 1.5 is invalid"),
        ("learning-rate", -0.1, "'learning-rate' = -0.1 is invalid: it must be > 0"),
        ("dirichlet-alpha", 0.0, "'dirichlet-alpha' = 0.0 is invalid: it must be > 0"),
        ("public-fraction", 1.0, "'public-fraction' = 1.0 is invalid: it must be in [0, 1)"),
        ("num-server-rounds", 0, "'num-server-rounds' = 0 is invalid"),
        ("batch-size", 2.5, "'batch-size' must be of type int, got float 2.5"),
        ("augment", "yes", "'augment' must be of type bool, got str"),
        ("local-epochs", True, "'local-epochs' must be of type int, got bool"),
        ("momentum", float("nan"), "'momentum' must be a finite number"),
        ("method", "fedsgd", "'method' = 'fedsgd' is invalid: it must be one of 'fedat', 'fedavg', 'fedavg-rds'"),
        ("temperature", 0.0, "'temperature' = 0.0 is invalid: it must be > 0"),
        ("temperature", -1.0, "'temperature' = -1.0 is invalid"),
        ("selection-fraction", 0.0, "'selection-fraction' = 0.0 is invalid: it must be in (0, 1]"),
        ("selection-fraction", 1.2, "'selection-fraction' = 1.2 is invalid"),
        ("selection-fraction", "half", "'selection-fraction' must be of type float or \"auto\", got str 'half'"),
        ("freeze", "top", "'freeze' = 'top' is invalid: it must be one of 'none', 'low', 'mid', 'up'"),
        ("data-selection", "loss", "'data-selection' = 'loss' is invalid"),
        ("fedprox.proximal-mu", -0.5, "'fedprox.proximal-mu' = -0.5 is invalid: it must be >= 0"),
        ("pretrain", "imagenet", "'pretrain' = 'imagenet' is invalid"),
        (
            "client-selection",
            "greedy",
            "'client-selection' = 'greedy' is invalid: it must be one of 'random', 'fedentopt'",
        ),
        ("fedentopt-buffer", 0.0, "'fedentopt-buffer' = 0.0 is invalid: it must be in (0, 1)"),
        ("fedentopt-buffer", 1.0, "'fedentopt-buffer' = 1.0 is invalid"),
        ("label-dp-epsilon", -0.5, "'label-dp-epsilon' = -0.5 is invalid: it must be >= 0"),
        ("lr-decay", 0.0, "'lr-decay' = 0.0 is invalid: it must be in (0, 1]"),
        ("straggler-fraction", 1.0, "'straggler-fraction' = 1.0 is invalid: it must be in [0, 1)"),
        ("min-train-nodes", 0, "'min-train-nodes' = 0 is invalid: it must be > 0"),
        ("aggregation", "fedavg", "'aggregation' = 'fedavg' is invalid: it must be one of 'clipped-mean', 'mean'"),
        ("clip-multiple", 0.0, "'clip-multiple' = 0.0 is invalid: it must be > 0"),
        ("weight-cap-multiple", -1.0, "'weight-cap-multiple' = -1.0 is invalid: it must be > 0"),
        ("trim-fraction", 0.5, "'trim-fraction' = 0.5 is invalid: it must be in [0, 0.5)"),
        ("byzantine-clients", -1, "'byzantine-clients' = -1 is invalid: it must be >= 0"),
        ("fail-partitions", "3:scale10", "'fail-partitions' = '3:scale10' is invalid: it lists 'partition:mode' pairs"),
        ("fail-partitions", "3:explode", "'fail-partitions' = '3:explode' is invalid: it lists 'partition:mode' pairs"),
        ("fail-partitions", "x:raise", "'fail-partitions' = 'x:raise' is invalid"),
    ],
)
def test_invalid_values_name_the_key(defaults: dict, key: str, value: object, expected: str) -> None:
    defaults[key] = value
    with pytest.raises(ConfigError) as err:
        parse_config(defaults)
    assert expected in str(err.value)


WRONG_TYPE = {str: 5, int: "five", float: "five", bool: "yes"}
#: Values of the right type that some check refuses; each checked key must refuse at least one of them.
OUT_OF_RANGE = {str: ["nope", "0:explode", "bad\x00path"], int: [-1, 0], float: [-1.0, 0.0, 1.0, 1.5]}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.key)
def test_every_key_refuses_a_wrong_type_naming_itself(defaults: dict, setting) -> None:
    defaults[setting.key] = WRONG_TYPE[setting.type]
    named = (
        f"run config '{setting.key}' (must be of type {setting.type.__name__}|= 5 is invalid)"  # method: checked first
    )
    with pytest.raises(ConfigError, match=named):
        parse_config(defaults)


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.check], ids=lambda s: s.key)
def test_every_checked_key_refuses_a_bad_value_naming_itself(defaults: dict, setting) -> None:
    refused = [v for v in OUT_OF_RANGE[setting.type] if setting.check(v)]
    assert refused, f"no out-of-range probe for {setting.key}"
    defaults[setting.key] = refused[0]
    with pytest.raises(ConfigError, match=f"run config '{setting.key}' = .* is invalid: it "):
        parse_config(defaults)


def test_ints_are_accepted_for_floats(defaults: dict) -> None:
    defaults["learning-rate"] = 1
    assert parse_config(defaults).learning_rate == 1.0


def test_missing_key_is_reported(defaults: dict) -> None:
    del defaults["seed"]
    with pytest.raises(ConfigError, match="'seed' is missing"):
        parse_config(defaults)


def test_the_settings_table_is_current() -> None:
    """Every key appears in docs/configuration.md with its default and help (regenerate with python -m
    scripts.update_settings)."""
    assert markdown_table(CATALOGUE) in SETTINGS_PAGE.read_text()


def test_the_settings_table_has_one_row_per_key() -> None:
    section = SETTINGS_PAGE.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| `", section, flags=re.M)
    assert sorted(rows) == sorted(s.key for s in SETTINGS)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "../outside",
            ("may hold only letters, digits, '-', '_', '.', '=' and '+', not '/' (it names one folder, never a path)"),
        ),
        ("/etc/cron.d", "not '/'"),
        ("a/b", "not '/'"),
        ("a\\b", "not '\\\\'"),
        ("~", "not '~'"),
        ("two words", "not ' '"),
        ("new\nline", "not '\\n'"),
        ("..", "must not start with '.' (no '.', '..' or hidden folders)"),
        (".", "must not start with '.'"),
        (".hidden", "must not start with '.'"),
        ("x" * 256, "must be at most 255 characters long, not 256"),
    ],
)
def test_unsafe_run_names_are_refused_naming_the_key(defaults: dict, name: str, expected: str) -> None:
    defaults["run-name"] = name
    with pytest.raises(ConfigError) as err:
        parse_config(defaults)
    message = str(err.value)
    assert message.startswith(f"run config 'run-name' = {name!r} is invalid: it ") and expected in message


@pytest.mark.parametrize(
    "name", ["", "run", "long-run_2.v3", "fedavg+fedentopt__dirichlet-alpha=0.1__seed0", "a..b", "x" * 255]
)
def test_safe_run_names_are_accepted(defaults: dict, name: str) -> None:
    defaults["run-name"] = name
    assert parse_config(defaults).run_name == name


PATH_KEYS = ["results-dir", "pretrain-cache-dir", "feature-cache-dir", "data-dir", "pretrain-checkpoint"]


@pytest.mark.parametrize("key", PATH_KEYS)
@pytest.mark.parametrize("value", ["bad\x00path", "line\nbreak", "tab\there"])
def test_path_settings_refuse_control_characters(defaults: dict, key: str, value: str) -> None:
    defaults[key] = value
    with pytest.raises(ConfigError) as err:
        parse_config(defaults)
    assert str(err.value) == (
        f"run config '{key}' = {value!r} is invalid: it must not hold control characters such as NUL or a line break"
    )


@pytest.mark.parametrize("key", ["results-dir", "pretrain-cache-dir", "feature-cache-dir", "data-dir"])
@pytest.mark.parametrize("value", ["/srv/fedft", "../shared/results", "~/fedft", "with space/ünïcode"])
def test_path_settings_may_point_anywhere(defaults: dict, key: str, value: str) -> None:
    defaults[key] = value
    assert parse_config(defaults).to_dict()[key] == value


def test_results_dir_must_not_be_empty(defaults: dict) -> None:
    defaults["results-dir"] = " "
    with pytest.raises(ConfigError, match="'results-dir' = ' ' is invalid: it must name a folder, not be empty"):
        parse_config(defaults)
