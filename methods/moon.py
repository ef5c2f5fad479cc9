"""MOON: model-contrastive local training (Li et al. 2021; THESIS-METHODS §0.5), a baseline of Ch. 4 and Ch. 6.

The local loss is CE + μ · ℓ_con with

    ℓ_con = −log( exp(cos(z, z_glob)/τ) / (exp(cos(z, z_glob)/τ) + exp(cos(z, z_prev)/τ)) ),

z the local model's representation, z_glob the received global model's (positive) and z_prev the client's
previous local model's (negative), all on the same batch. The thesis gives no projection head, τ or
first-round rule; we follow its code ([CODE] in THESIS-METHODS): **no projection head**, the representation is
the input of the final Linear layer (the 64-d pooled feature of a WRN-d-1, the 84-d feature of LeNet-5),
τ = 0.5, and the negative is left out the first time a client participates. With only the positive in the
softmax the fraction is exp(s)/exp(s) = 1, so ℓ_con = 0 exactly and the first participation trains on CE alone.
μ (``mu``) is tuned in the thesis over {0.01, 0.1, 1, 5}; Table 4.1 has 0.1 / 1 / 0.01 depending on the data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from methods.model_outputs import eval_mode, logits_and_features

#: τ of the thesis's code (``moon_temp``).
DEFAULT_TEMPERATURE = 0.5


def check_moon_settings(mu: float, temperature: float) -> None:
    """Refuse μ < 0 (``moon-mu``) and τ ≤ 0 (``moon-temperature``)."""
    if mu < 0:
        raise ValueError(f"moon-mu must be >= 0, got {mu}")
    if temperature <= 0:
        raise ValueError(f"moon-temperature must be > 0, got {temperature}")


def moon_contrastive_loss(
    z: torch.Tensor, z_global: torch.Tensor, z_previous: torch.Tensor | None, temperature: float = DEFAULT_TEMPERATURE
) -> torch.Tensor:
    """Batch mean of ℓ_con for representations ``z`` (N × D) against the positive and the optional negative.

    ``z_previous`` None (first participation) leaves a single-term softmax, and the loss is exactly 0.
    """
    if temperature <= 0:
        raise ValueError(f"moon-temperature must be > 0, got {temperature}")
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


def local_logits_and_representation(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The trained model's logits and representation z on a batch, in one pass (gradients flow through both)."""
    return logits_and_features(model, x)


@torch.no_grad()
def anchor_representation(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """z_glob or z_prev: a fixed model's representation of the batch, without gradient, in eval mode.

    Eval mode (dropout off, BN running statistics) keeps the anchors deterministic and leaves the fixed
    models' statistics untouched; the thesis does not say which mode its code used.
    """
    with eval_mode(model):
        return logits_and_features(model, x)[1]
