"""The method registry: methods found by their package, the contract checked at import, another method's setting
refused at start naming its owner."""

from __future__ import annotations

import types

import pytest

from methods.base import Method, MethodContractError
from methods.registry import CATALOGUE, METHODS, ORIGIN, declared_methods, default_config, for_run, method_modules
from run_config import ConfigError
from run_config.defaults import load_defaults


def test_every_method_module_and_package_is_found_and_each_name_once() -> None:
    found = {module.__name__ for module in method_modules()}
    assert {"methods.fedavg", "methods.kafal.method", "methods.fedsplit.method", "methods.scaffold.method"} <= found
    assert "methods.registry" not in found and not any(name.startswith("methods.common") for name in found)
    assert ORIGIN["fedavg-rds"] == "fedavg" and ORIGIN["fedmd"] == "fedkad" and ORIGIN["kafal"] == "kafal"
    assert list(METHODS) == [m.name for module in method_modules() for m in declared_methods(module)]


def test_a_declaration_that_breaks_the_contract_is_refused_naming_the_part() -> None:
    with pytest.raises(MethodContractError, match="method 'x': 'client_train' is not callable"):
        Method("x", "a method", client_train="train")  # type: ignore[arg-type]
    with pytest.raises(MethodContractError, match="query 'ask' has no callable answer"):
        Method("x", "a method", queries={"ask": 3})  # type: ignore[dict-item]
    with pytest.raises(MethodContractError, match="settings entry <class 'int'> is not a dataclass"):
        Method("x", "a method", settings=(int,))
    with pytest.raises(MethodContractError, match="needs a 'name' and a 'summary'"):
        Method("x", "")


def test_a_module_without_methods_is_refused_naming_it() -> None:
    with pytest.raises(MethodContractError, match="methods.empty declares no METHODS"):
        declared_methods(types.ModuleType("methods.empty"))
    stray = types.ModuleType("methods.stray")
    stray.METHODS = ("fedavg",)  # type: ignore[attr-defined]
    with pytest.raises(MethodContractError, match="methods.stray.METHODS holds 'fedavg', not a methods.base.Method"):
        declared_methods(stray)


def test_another_methods_setting_is_refused_naming_the_key_and_its_method() -> None:
    with pytest.raises(ConfigError, match="'fedprox.proximal-mu' is a setting of method 'fedprox', not of 'fedavg'"):
        default_config(method="fedavg", proximal_mu=0.5)
    with pytest.raises(ConfigError, match="'kafal.al-cycles' is a setting of method 'kafal', not of 'fedft-eds'"):
        default_config(method="fedft-eds", al_cycles=3)
    # An objective's settings belong to the runs that train with it, whatever their method.
    assert default_config(method="fedft-eds", objective="proximal", proximal_mu=0.5).settings
    assert default_config(method="fedprox-rds", proximal_mu=0.5).method == "fedprox-rds"


def test_a_shared_base_gives_each_run_the_settings_its_method_reads() -> None:
    base = {**load_defaults(), "fedprox.proximal-mu": 0.5, "kafal.al-cycles": 3}
    fedavg = for_run({**base, "method": "fedavg"})
    assert (
        fedavg["fedprox.proximal-mu"] == load_defaults()["fedprox.proximal-mu"]
        and fedavg["kafal.al-cycles"] == load_defaults()["kafal.al-cycles"]
    )
    assert for_run({**base, "method": "fedprox"})["fedprox.proximal-mu"] == 0.5
    assert for_run({**base, "method": "fedavg"}, keep=("kafal.al-cycles",))["kafal.al-cycles"] == 3
    assert CATALOGUE.methods is METHODS
