"""MOON: model-contrastive local training (Li et al. 2021; thesis §2.3.2), a baseline of Ch. 4 and Ch. 6.

The local loss is CE + μ · ℓ_con with

    ℓ_con = −log( exp(cos(z, z_glob)/τ) / (exp(cos(z, z_glob)/τ) + exp(cos(z, z_prev)/τ)) ),

z the local model's representation, z_glob the received global model's (positive) and z_prev the client's
previous local model's (negative), all on the same batch. The thesis gives no projection head, τ or
first-round rule; we follow its code (the thesis's code): **no projection head**, the representation is
the input of the final Linear layer (``SplitModel.embed_and_classify``: the 64-d pooled feature of a WRN-d-1, the
84-d feature of LeNet-5), τ = 0.5, and the negative is left out the first time a client participates. With only
the positive in the softmax the fraction is exp(s)/exp(s) = 1, so ℓ_con = 0 exactly and the first participation
trains on CE alone. μ (``moon.moon-mu``) is tuned in the thesis over {0.01, 0.1, 1, 5}; Table 4.1 has 0.1 / 1 / 0.01
depending on the data; the default is 0.1 (CIFAR-10 at Dir(0.1), GSC).

In the app MOON is an objective (``objective = "contrastive"``), so it composes with any method: ``moon`` is FedAvg
with it, ``method="fedfsc" objective="contrastive"`` is FedFSC(MOON), and with a frozen part (``freeze``) z is read
from θ's stages on φ's output. A client keeps its trained θ in its node state (``context.state``, key
``moon-previous-model``) as its next round's negative; both anchors run in eval mode, without gradients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, RecordDict

from client_app.objective import LocalTraining
from methods.base import Method
from models.outputs import eval_mode
from models.split_model import NO_FREEZE, SplitModel
from run_config.settings import non_negative, positive, setting

#: τ of the thesis's code (``moon_temp``).
DEFAULT_TEMPERATURE = 0.5
#: Where a client keeps its previous local θ (its node state): the negative of its next round.
PREVIOUS_MODEL = "moon-previous-model"


@dataclass(frozen=True)
class MoonSettings:
    NAMESPACE: ClassVar[str] = "moon"

    moon_mu: float = setting(
        0.1, 'MOON μ of `objective = "contrastive"`: weight of the model-contrastive term.', non_negative
    )
    moon_temperature: float = setting(
        DEFAULT_TEMPERATURE, "MOON τ: temperature of the contrastive softmax over cosine similarities.", positive
    )


def moon_contrastive_loss(
    z: torch.Tensor, z_global: torch.Tensor, z_previous: torch.Tensor | None, temperature: float = DEFAULT_TEMPERATURE
) -> torch.Tensor:
    """Batch mean of ℓ_con for representations ``z`` (N × D) against the positive and the optional negative.

    ``z_previous`` None (first participation) leaves a single-term softmax, and the loss is exactly 0.
    """
    if temperature <= 0:
        raise ValueError(f"moon.moon-temperature must be > 0, got {temperature}")
    similarities = [F.cosine_similarity(z, z_global, dim=1)]
    if z_previous is not None:
        similarities.append(F.cosine_similarity(z, z_previous, dim=1))
    logits = torch.stack(similarities, dim=1) / temperature
    target = torch.zeros(len(z), dtype=torch.long, device=z.device)
    return F.cross_entropy(logits, target)


def moon_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    z: torch.Tensor,
    z_global: torch.Tensor,
    z_previous: torch.Tensor | None,
    *,
    mu: float,
    temperature: float = DEFAULT_TEMPERATURE,
) -> torch.Tensor:
    """MOON's local objective on one batch: CE(logits, labels) + μ · ℓ_con."""
    return F.cross_entropy(logits, labels) + mu * moon_contrastive_loss(z, z_global, z_previous, temperature)


@torch.no_grad()
def anchor_representation(model: SplitModel, h: torch.Tensor, level: str = NO_FREEZE) -> torch.Tensor:
    """z_glob or z_prev: a fixed model's representation of the batch (``h``: the input of the stages above
    ``level``), without gradient, in eval mode.

    Eval mode (dropout off, BN running statistics) keeps the anchors deterministic and leaves the fixed
    models' statistics untouched; the thesis does not say which mode its code used.
    """
    with eval_mode(model):
        return model.embed_and_classify(h, level)[0]


def fixed_copy(model: SplitModel, state: Mapping[str, torch.Tensor] | None = None) -> SplitModel:
    """A copy of ``model`` that does not train (no gradients, eval mode), with ``state`` (some keys) loaded over it."""
    copy = deepcopy(model)
    if state is not None:
        copy.load_state_dict(state, strict=False)
    for p in copy.parameters():
        p.requires_grad_(False)
    return copy.eval()


def previous_local_state(node_state: RecordDict, keys: Sequence[str]) -> dict[str, torch.Tensor] | None:
    """The θ this client kept after its previous participation, or None (its first, or one kept for another θ)."""
    held = node_state.array_records.get(PREVIOUS_MODEL)
    if held is None or sorted(held.keys()) != sorted(keys):
        return None
    return held.to_torch_state_dict()


class Contrastive:
    """MOON's objective: CE + μ·ℓ_con against the received model (positive) and the previous local one (negative)."""

    def __init__(self, training: LocalTraining) -> None:
        settings = training.config.settings(MoonSettings)
        self.mu, self.temperature = settings.moon_mu, settings.moon_temperature
        self.training = training
        self.keys = training.model.upper_state_keys(training.level)
        self.global_model = fixed_copy(training.model)
        previous = previous_local_state(training.node_state, self.keys)
        self.previous_model = fixed_copy(training.model, previous) if previous is not None else None

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        level, h = self.training.level, self.training.lower(inputs)
        z, logits = self.training.model.embed_and_classify(h, level)
        z_global = anchor_representation(self.global_model, h, level)
        z_previous = anchor_representation(self.previous_model, h, level) if self.previous_model is not None else None
        return moon_loss(logits, labels, z, z_global, z_previous, mu=self.mu, temperature=self.temperature)

    def finish(self) -> None:
        """Keep the trained θ as the negative of this client's next round."""
        state = self.training.model.state_dict()
        self.training.node_state[PREVIOUS_MODEL] = ArrayRecord({k: state[k].detach().cpu() for k in self.keys})


MOON = Method(
    "moon",
    "MOON: FedAvg with the model-contrastive term (μ = `moon.moon-mu`, τ = `moon.moon-temperature`).",
    presets={"freeze": "none", "data-selection": "all", "objective": "contrastive"},
    settings=(MoonSettings,),
    objectives={"contrastive": Contrastive},
    paper="thesis §0.5 (MOON, Li et al. 2021)",
)
METHODS = (MOON,)
