"""Whether the configured model can run on the configured data, checked at the start of a run (by the launcher before
Flower's engine starts, and by the ServerApp before it waits for nodes): it is built, a batch of the data's shape goes
through it, and its split levels are compared with ``freeze``. A model that cannot be built or take the data (a user's
factory that cannot be imported, LeNet-5 on 64 x 64 images) stops the run with one line naming the setting.
"""

from __future__ import annotations

import math

import torch

from models import SplitModel
from models.outputs import eval_mode
from models.split_model import NO_FREEZE
from models.user_model import UserModel, UserModelError, is_user_model
from run_config.derived import build_model_for, dataset_info
from run_config.schema import ConfigError, RunConfig


def takes(model: SplitModel, input_shape: tuple[int, int, int]) -> str | None:
    """Why ``model`` cannot compute logits for images of ``input_shape`` (two zero images, eval mode), or None."""
    try:
        with torch.no_grad(), eval_mode(model):
            logits = model(torch.zeros(2, *input_shape))
    except Exception as err:  # a shape mismatch surfaces as RuntimeError, ValueError, ...
        return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or logits.shape[0] != 2:
        return f"it returned {type(logits).__name__} {getattr(logits, 'shape', '')}, not logits of shape 2 x classes"
    return None


def check_model(config: RunConfig) -> list[str]:
    """``ConfigError`` naming the setting when the model cannot be built, split at ``freeze`` or take the dataset's
    images; else lines describing a user's model for the log."""
    if config.phi_end and not is_user_model(config.model):
        raise ConfigError(
            f"run config 'phi-end' = {config.phi_end!r} is for a model given as 'package.module:factory'; model "
            f"{config.model!r} splits at low, mid and up ('freeze')"
        )
    try:
        model = build_model_for(config)
    except UserModelError as err:
        raise ConfigError(str(err)) from None
    if config.freeze != NO_FREEZE and config.freeze not in model.levels:
        levels = " or ".join(repr(level) for level in model.levels)
        fix = f"set freeze to {levels}" if levels else "set 'phi-end' to the module whose output ends φ"
        raise ConfigError(
            f"run config 'freeze' = {config.freeze!r} (method {config.method!r}) is no split level of model "
            f"{config.model!r}, which has {', '.join((NO_FREEZE, *model.levels))}: {fix}, or freeze='none'"
        )
    shape = dataset_info(config).input_shape
    problem = takes(model, shape)
    if problem:
        raise ConfigError(
            f"run config 'model' = {config.model!r} cannot take dataset {config.dataset!r}'s images "
            f"({'x'.join(map(str, shape))}): {problem}"
        )
    if not isinstance(model, UserModel):
        return []
    lines = [_describe(config, model)]
    if model.new_head is not None:
        name, classes = model.new_head
        lines.append(
            f"model {config.model!r}: its classifier {name!r} has {classes} outputs; a new one gives the dataset's "
            f"{model.stages['head'].out_features} classes"
        )
    return lines


def _describe(config: RunConfig, model: UserModel) -> str:
    sizes = {name: sum(math.prod(p.shape) for p in stage.parameters()) for name, stage in model.stages.items()}
    split = f"φ ends at {config.phi_end!r} ({sizes.get('mid', 0):,} parameters), " if config.phi_end else "no φ, "
    return (
        f"model {config.model!r}: {split}{sizes['upper']:,} parameters above it and {sizes['head']:,} in the classifier"
    )
