"""Configuration: the defaults parse, bad values are refused naming the key, the README lists every key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from run_config import SETTINGS, ConfigError, RunConfig, parse_run_config
from run_config.defaults import load_defaults, markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_defaults_parse(defaults: dict) -> None:
    config = parse_run_config(defaults)
    assert config.dataset == "fashion-mnist-mini" and config.to_dict() == defaults


def test_settings_and_pyproject_and_dataclass_agree(defaults: dict) -> None:
    keys = [s.key for s in SETTINGS]
    assert sorted(keys) == sorted(defaults)
    assert [k.replace("-", "_") for k in keys] == list(RunConfig.__dataclass_fields__)


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
    ],
)
def test_invalid_values_name_the_key(defaults: dict, key: str, value: object, expected: str) -> None:
    defaults[key] = value
    with pytest.raises(ConfigError) as err:
        parse_run_config(defaults)
    assert expected in str(err.value)


def test_ints_are_accepted_for_floats(defaults: dict) -> None:
    defaults["learning-rate"] = 1
    assert parse_run_config(defaults).learning_rate == 1.0


def test_missing_key_is_reported(defaults: dict) -> None:
    del defaults["seed"]
    with pytest.raises(ConfigError, match="'seed' is missing"):
        parse_run_config(defaults)


def test_readme_configuration_table_is_current() -> None:
    """Every key appears in the README with its pyproject default (regenerate with python -m run_config.defaults)."""
    assert markdown_table(load_defaults()) in README.read_text()


def test_readme_rows_are_one_per_key() -> None:
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `", README.read_text(), flags=re.M)
    assert sorted(rows) == sorted(s.key for s in SETTINGS)
