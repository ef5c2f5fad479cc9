"""``pretrain = "checkpoint"``: the initial weights from a state-dict file, checked against the run's model at start.

The file holds a state dict of the run's model (``torch.save(model.state_dict(), path)``): under the app's keys (a
run's final model), or, for a model given as ``package.module:factory``, under the module's own keys
(``models/user_model.py``; entries of modules its forward never calls are ignored). Its classifier may have another
number of classes than the data, or be absent (a backbone pretrained elsewhere: the usual case); the model then keeps
a new classifier for the data's classes, seeded by ``seed``, and the log and summary.json name it. Anything else that
differs (a file that holds no state dict, keys that match none of the model's, a missing or extra key, another shape)
stops the run at its start with one line naming the setting: by the launcher before Flower's engine starts
(``python -m simulation``, exit code 2), by the ServerApp before it waits for the clients.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from models import SplitModel
from models.user_model import UserModel
from run_config import ConfigError, RunConfig
from server_app.torch_files import load_torch_file

#: Keys under which training scripts often nest the state dict in a larger checkpoint.
_NESTING_KEYS = ("state_dict", "model_state_dict", "model")
#: At most this many keys are named in a message.
_SHOWN = 3


@dataclass(frozen=True)
class LoadedCheckpoint:
    """The model's state with the checkpoint's values, and what the log and summary.json say of it."""

    state: dict[str, torch.Tensor]
    path: Path
    sha256: str
    new_head: list[str]  # the classifier's keys the model keeps fresh (empty: the checkpoint's classifier is used)
    checkpoint_classes: int | None  # the classes of the checkpoint's own classifier, when it has one

    def report(self) -> dict[str, Any]:
        return {
            "source": "checkpoint",
            "checkpoint": str(self.path),
            "sha256": self.sha256,
            "new_head": self.new_head,
            "checkpoint_classes": self.checkpoint_classes,
        }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _some(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in keys[:_SHOWN]) + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def _tensors(raw: object, setting: str) -> dict[str, torch.Tensor]:
    if isinstance(raw, dict) and raw and all(isinstance(v, torch.Tensor) for v in raw.values()):
        return raw
    if isinstance(raw, dict):
        nested = next((k for k in _NESTING_KEYS if isinstance(raw.get(k), dict)), None)
        if nested is not None:
            raise ConfigError(
                f"{setting} holds a checkpoint with the keys {_some(list(raw))}, not a state dict: save "
                f"checkpoint[{nested!r}] on its own (torch.save(checkpoint[{nested!r}], path))"
            )
    raise ConfigError(
        f"{setting} holds a {type(raw).__name__}, not a state dict of tensors (torch.save(model.state_dict(), path))"
    )


def _in_model_keys(state: dict[str, torch.Tensor], model: SplitModel) -> dict[str, torch.Tensor]:
    """``state`` under the model's keys: a user's module's own keys are mapped to the wrapped model's."""
    if not isinstance(model, UserModel):
        return state
    wrapped = {original: key for key, original in model.original_keys.items()}
    own = sum(key in wrapped for key in state)
    if own <= sum(key in model.original_keys for key in state):
        return state
    unused = set(model.unused_keys)
    return {wrapped.get(key, key): value for key, value in state.items() if key not in unused}


def load_checkpoint(config: RunConfig, model: SplitModel) -> LoadedCheckpoint:
    """The checkpoint of ``pretrain-checkpoint`` checked against ``model`` (a fresh, seeded one, whose classifier
    stays where the checkpoint's does not fit); ``ConfigError`` in one line otherwise."""
    path = Path(config.pretrain_checkpoint).expanduser()
    setting = f"run config 'pretrain-checkpoint' = {config.pretrain_checkpoint!r}"
    if not path.is_file():
        raise ConfigError(f"{setting} is not a readable file")
    try:
        raw = load_torch_file(path)
    except ValueError as err:
        raise ConfigError(f"{setting}: {err}") from None
    state = _in_model_keys(_tensors(raw, setting), model)
    expected = model.state_dict()
    head = model.classifier_keys()
    if not any(key in expected for key in state):
        raise ConfigError(
            f"{setting}: none of its {len(state)} keys is one of model {config.model!r}'s (it holds "
            f"{_some(list(state))}; the model {_some(list(expected))}): is it a state dict of this model?"
        )
    extra = [key for key in state if key not in expected]
    missing = [key for key in expected if key not in state and key not in head]
    if extra or missing:
        parts = [f"the model lacks {len(extra)} of its keys ({_some(extra)})"] if extra else []
        parts += [f"it lacks {len(missing)} of the model's ({_some(missing)})"] if missing else []
        raise ConfigError(f"{setting} does not fit model {config.model!r}: {'; '.join(parts)}")
    for key, value in state.items():
        if key not in head and tuple(value.shape) != tuple(expected[key].shape):
            raise ConfigError(
                f"{setting} does not fit model {config.model!r}: {key!r} is {tuple(value.shape)} in the checkpoint "
                f"but {tuple(expected[key].shape)} in the model (dataset {config.dataset!r})"
            )
    fits = all(key in state and tuple(state[key].shape) == tuple(expected[key].shape) for key in head)
    weights = next((state[key] for key in head if key in state and key.endswith("weight")), None)
    loaded = {key: state[key].to(expected[key].dtype) if key in state else expected[key] for key in expected}
    if not fits:
        loaded.update({key: expected[key] for key in head})
    return LoadedCheckpoint(
        loaded,
        path.resolve(),
        file_sha256(path),
        [] if fits else head,
        int(weights.shape[0]) if weights is not None and weights.ndim == 2 else None,
    )
