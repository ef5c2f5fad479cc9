"""Settings by namespace: each method package's settings live under its name (``fedprox.proximal-mu``), in
pyproject's ``[tool.flwr.app.config.<namespace>]`` tables, as Flower flattens them; a key as it was before is refused
naming its new one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import pytest
from flwr.common.config import get_fused_config_from_dir, parse_config_args

from methods.base import Method, MethodContractError
from methods.registry import (
    CATALOGUE,
    METHODS,
    check_namespaces,
    config_with_overrides,
    parse_config,
)
from run_config import ConfigError
from run_config.defaults import PYPROJECT, load_defaults
from run_config.parsing import all_settings, default_values, moved_keys
from run_config.schema import RunConfig
from run_config.settings import declared_settings, setting


def test_core_settings_are_top_level_and_every_method_setting_is_under_its_package() -> None:
    assert all("." not in s.key for s in declared_settings(RunConfig))
    for m in METHODS.values():
        for cls in m.settings:
            package = cls.__module__.split(".")[1]
            assert all(s.key == f"{package}.{s.name}" for s in declared_settings(cls)), cls
    assert moved_keys(CATALOGUE)["proximal-mu"] == "fedprox.proximal-mu"
    assert moved_keys(CATALOGUE)["client-models"] == "common.client-models"  # methods/common/ declares it
    assert not set(moved_keys(CATALOGUE)) & {s.key for s in all_settings(CATALOGUE)}  # no old key is a key now


def test_flower_reads_the_pyproject_tables_and_dotted_overrides_as_the_app_declares_them() -> None:
    """What ``flwr run`` hands the ServerApp: the pyproject tables flattened, ``--run-config`` fused over them."""
    assert "[tool.flwr.app.config.fedprox]\nproximal-mu = 0.01\n" in PYPROJECT.read_text()
    overrides = parse_config_args(['method="fedprox" fedprox.proximal-mu=0.3 seed=4'])
    fused = get_fused_config_from_dir(PYPROJECT.parent, overrides)
    assert fused == {**default_values(CATALOGUE), **overrides} == {**load_defaults(), **overrides}
    assert parse_config(fused).to_dict()["fedprox.proximal-mu"] == 0.3
    with pytest.raises(ValueError, match="Key 'proximal-mu' is not present"):  # Flower's own refusal of an old key
        get_fused_config_from_dir(PYPROJECT.parent, parse_config_args(["proximal-mu=0.3"]))


def test_a_key_from_before_namespaces_is_refused_naming_its_new_key() -> None:
    moved = "run config 'proximal-mu' is now 'fedprox.proximal-mu'"
    with pytest.raises(ConfigError, match=moved):
        config_with_overrides("method=fedprox proximal-mu=0.3")
    with pytest.raises(ConfigError, match=moved):
        parse_config({**load_defaults(), "method": "fedprox", "proximal-mu": 0.3})
    with pytest.raises(ConfigError, match="'fedsplit.n-comm' is not a run-config key; did you mean 'fedsplit.n-com'"):
        config_with_overrides("fedsplit.n-comm=3")


def test_another_methods_namespaced_setting_is_refused_naming_the_key_and_its_methods() -> None:
    with pytest.raises(
        ConfigError, match="'common.client-models' is a setting of method 'fedat' or 'fedkad' or 'fedmd'"
    ):
        config_with_overrides('method=fedavg common.client-models="0:wrn-16-1"')


@dataclasses.dataclass(frozen=True)
class Unnamed:
    level: int = setting(1, "a setting")


@dataclasses.dataclass(frozen=True)
class Misnamed:
    NAMESPACE: ClassVar[str] = "elsewhere"
    level: int = setting(1, "a setting")


def test_a_settings_class_without_its_packages_namespace_is_refused() -> None:
    with pytest.raises(MethodContractError, match="settings class Unnamed declares no NAMESPACE"):
        Method("x", "a method", settings=(Unnamed,))
    Misnamed.__module__ = "methods.toy.method"
    with pytest.raises(MethodContractError, match="Misnamed has NAMESPACE 'elsewhere', not .* package .* 'toy'"):
        check_namespaces(Method("x", "a method", settings=(Misnamed,)))


def test_every_experiment_file_uses_the_current_keys() -> None:
    """No experiment (nor its base or grid) sets a key from before namespaces: each would be refused at its run."""
    old = set(moved_keys(CATALOGUE))
    for path in sorted(Path(PYPROJECT.parent, "experiments").glob("*.yaml")):
        text = path.read_text()
        assert not [key for key in old if f"\n  {key}:" in text or f" {key}: " in text], path
