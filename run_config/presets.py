"""Method presets (SPEC §4-5): what each ``method`` sets, unless the key is given explicitly.

A preset-controlled key defaults to ``"auto"`` in pyproject.toml; any other value overrides the preset,
so e.g. ``method="fedft-eds" selection-fraction=0.5`` is FedFT-EDS at P_ds = 50%.
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"

#: method -> (freeze, data-selection, selection-fraction, proximal-mu)
METHOD_PRESETS: dict[str, dict[str, Any]] = {
    "fedavg": {"freeze": "none", "data-selection": "all", "selection-fraction": 1.0, "proximal-mu": 0.0},
    "fedprox": {"freeze": "none", "data-selection": "all", "selection-fraction": 1.0, "proximal-mu": 0.01},
    "fedavg-rds": {"freeze": "none", "data-selection": "random", "selection-fraction": 0.1, "proximal-mu": 0.0},
    "fedprox-rds": {"freeze": "none", "data-selection": "random", "selection-fraction": 0.1, "proximal-mu": 0.01},
    "fedft-all": {"freeze": "mid", "data-selection": "all", "selection-fraction": 1.0, "proximal-mu": 0.0},
    "fedft-rds": {"freeze": "mid", "data-selection": "random", "selection-fraction": 0.1, "proximal-mu": 0.0},
    "fedft-eds": {"freeze": "mid", "data-selection": "entropy", "selection-fraction": 0.1, "proximal-mu": 0.0},
}

METHODS: tuple[str, ...] = tuple(METHOD_PRESETS)
PRESET_KEYS: tuple[str, ...] = ("freeze", "data-selection", "selection-fraction", "proximal-mu")


def resolve_presets(values: dict[str, Any]) -> dict[str, Any]:
    """Replace every ``"auto"`` preset key by the value the method sets."""
    preset = METHOD_PRESETS[values["method"]]
    return {key: preset[key] if key in PRESET_KEYS and value == AUTO else value for key, value in values.items()}
