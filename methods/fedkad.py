"""FedKAD and FedMD: distillation to the client consensus, with prototype feature maps (thesis §5.5, Alg. 4;
THESIS-METHODS §3).

Client k, after its local epochs, sends per-class prototypes at the penultimate layer (level ``up``: 64×8×8 for
every WRN-d-1): F_{k,c} = mean of f_φ(x) over its samples of class c, zero for an absent class (eq. 5.21). We
send a presence mask with them, so that the server does not have to infer holders from non-zero maps.
Server: F_{g,c} = mean of F_{k,c} over the holders K_c of class c only (eq. 5.26); the consensus on a random
draw of unlabelled generic samples is the uniform mean of the client models' logits (eqs. 5.22–5.23); the
global model (eq. 5.29) and every client model (eq. 5.30) minimise

    L_KD + β · L_θ,   L_KD = mean_i ‖f_w(x_i) − z_con,i‖₁ (L1 on raw logits, no temperature or softmax),
                      L_θ  = Σ_c CE(θ(F_{g,c}), c) over the classes some client holds (eq. 5.27).

FedKAD without prototype regularisation (β = 0, or ``use_prototypes=False``) is FedMD's consensus distillation
("FedMD (global)" adds a global model trained the same way). Decisions: the text sums L_KD over D_g; we take
the batch mean of the per-sample L1 norms (mini-batch SGD; lr 0.1 against a sum over 64 samples would be a 64×
step). L_θ sums over classes as the text writes, but skips classes no client holds (their prototype is
undefined). β = 1 (CIFAR-10) or 0.5 (GSC), Table 5.9.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from methods.model_outputs import eval_mode
from methods.payload_size import FLOAT32_BYTES, feature_map_bytes
from models.batchnorm import settle_batchnorm
from models.split_model import SplitModel

BETA_KEY = "prototype-beta"
GENERIC_SAMPLES_KEY = "generic-samples"

#: The thesis splits FedKAD's models at the penultimate feature maps: θ = final BN-ReLU-pool-FC.
PROTOTYPE_LEVEL = "up"
DEFAULT_BETA = 1.0
#: Generic samples drawn per round for distillation (§5.6).
DEFAULT_GENERIC_SAMPLES = 5000


def check_fedkad_settings(beta: float, generic_samples: int) -> None:
    """Refuse ``prototype-beta`` < 0 and ``generic-samples`` < 1."""
    if beta < 0:
        raise ValueError(f"{BETA_KEY} must be >= 0, got {beta}")
    if generic_samples < 1:
        raise ValueError(f"{GENERIC_SAMPLES_KEY} must be >= 1, got {generic_samples}")


def class_prototypes(
    feature_maps: torch.Tensor, labels: torch.Tensor, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-class mean feature map (C × …) and a presence mask (C): absent classes are all-zero and False."""
    counts = torch.bincount(labels, minlength=num_classes)
    if len(counts) > num_classes:
        raise ValueError(f"labels reach {len(counts) - 1}, beyond num_classes = {num_classes}")
    sums = torch.zeros(num_classes, *feature_maps.shape[1:], dtype=feature_maps.dtype, device=feature_maps.device)
    return _class_means(sums.index_add_(0, labels, feature_maps), counts)


def _class_means(sums: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-class sums divided by their counts (zero where the count is 0), and the presence mask."""
    shape = (len(counts),) + (1,) * (sums.dim() - 1)
    return sums / counts.clamp(min=1).to(sums.dtype).view(shape), counts > 0


@torch.no_grad()
def local_prototypes(
    model: SplitModel,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    *,
    batch_size: int,
    level: str = PROTOTYPE_LEVEL,
) -> tuple[torch.Tensor, torch.Tensor]:
    """{F_{k,c}} from the updated φ_{k,E} (eq. 5.21), in eval mode, accumulated batch by batch on the device."""
    sums: torch.Tensor | None = None
    with eval_mode(model):
        for start in range(0, len(inputs), batch_size):
            maps = model.forward_to(inputs[start : start + batch_size], level)
            if sums is None:
                sums = torch.zeros(num_classes, *maps.shape[1:], dtype=maps.dtype, device=maps.device)
            sums.index_add_(0, labels[start : start + batch_size], maps)
    if sums is None:
        raise ValueError("prototypes need at least one local sample")
    return _class_means(sums, torch.bincount(labels, minlength=num_classes))


def global_prototypes(prototypes: torch.Tensor, present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """F_{g,c} = (1/|K_c|) Σ_{k∈K_c} F_{k,c} over the holders K_c only (eq. 5.26).

    ``prototypes`` is K × C × …, ``present`` K × C. Returns the C × … global prototypes (zero where no client
    holds the class) and which classes have at least one holder.
    """
    if prototypes.shape[:2] != present.shape:
        raise ValueError(f"prototypes {tuple(prototypes.shape)} and presence {tuple(present.shape)} disagree on K × C")
    shape = present.shape + (1,) * (prototypes.dim() - 2)
    weights = present.to(prototypes.dtype).view(shape)
    holders = present.sum(dim=0)
    sums = (prototypes * weights).sum(dim=0)
    per_class = holders.clamp(min=1).to(prototypes.dtype).view((-1,) + (1,) * (prototypes.dim() - 2))
    return sums / per_class, holders > 0


def draw_generic_indices(pool_size: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """A uniform draw without replacement of ``count`` generic samples (all of them when the pool is smaller)."""
    if count < 1:
        raise ValueError(f"{GENERIC_SAMPLES_KEY} must be >= 1, got {count}")
    return torch.randperm(pool_size, generator=generator)[: min(count, pool_size)]


def client_consensus(client_logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """z_con = (1/K) Σ_k z_k: the uniform mean of the client models' logits on the same generic samples."""
    if not client_logits:
        raise ValueError("the consensus needs at least one client model's logits")
    return torch.stack(list(client_logits)).mean(dim=0)


def l1_distillation_loss(student_logits: torch.Tensor, consensus: torch.Tensor) -> torch.Tensor:
    """L_KD: batch mean of ‖f_w(x) − z_con‖₁ on raw logits (eqs. 5.24–5.25); the consensus is a fixed target."""
    return (student_logits - consensus.detach()).abs().sum(dim=1).mean()


def prototype_cross_entropy(prototype_logits: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
    """L_θ = Σ_c CE(θ(F_{g,c}), c) over the held classes (eq. 5.27); ``prototype_logits`` row c is θ(F_{g,c})."""
    classes = torch.arange(len(held), device=prototype_logits.device)
    per_class = F.cross_entropy(prototype_logits, classes, reduction="none")
    return (per_class * held.to(per_class.dtype)).sum()


def fedkad_loss(
    student_logits: torch.Tensor,
    consensus: torch.Tensor,
    prototype_logits: torch.Tensor | None = None,
    held: torch.Tensor | None = None,
    *,
    beta: float = DEFAULT_BETA,
    use_prototypes: bool = True,
) -> torch.Tensor:
    """L_KD + β·L_θ on one batch (eqs. 5.29–5.30); with ``use_prototypes=False`` just L_KD (FedMD, or the
    "w/o prototype regularisation" ablation of Table 5.12)."""
    if beta < 0:
        raise ValueError(f"{BETA_KEY} must be >= 0, got {beta}")
    loss = l1_distillation_loss(student_logits, consensus)
    if not use_prototypes:
        return loss
    if prototype_logits is None or held is None:
        raise ValueError("prototype regularisation needs the prototypes' logits and the held-class mask")
    return loss + beta * prototype_cross_entropy(prototype_logits, held)


def fedmd_distillation_loss(student_logits: torch.Tensor, consensus: torch.Tensor) -> torch.Tensor:
    """FedMD's digest step: L1 distillation to the consensus, no prototype term (FedMD clients and global)."""
    return l1_distillation_loss(student_logits, consensus)


def prototype_bytes(num_classes: int, map_shape: Sequence[int], *, value_bytes: int = FLOAT32_BYTES) -> int:
    """Uplink bytes of one client's prototypes (C maps, float32; Table 5.10 counts 20 clients × 10 × 4096 × 4 B)."""
    return feature_map_bytes(num_classes, map_shape, value_bytes=value_bytes)


def prototype_logits(model: SplitModel, prototypes: torch.Tensor, level: str = PROTOTYPE_LEVEL) -> torch.Tensor:
    """θ(F_{g,c}) for every class: the upper part applied to the global prototypes, its BatchNorm in eval mode (a
    batch of C class means is no sample of the data, so it neither normalises by nor updates the running statistics);
    gradients flow to θ's weights."""
    upper = torch.nn.ModuleList(model.upper_stages(level))
    with eval_mode(upper):
        return model.forward_from(prototypes, level)


@torch.no_grad()
def model_logits(model: SplitModel, inputs: torch.Tensor, batch_size: int) -> torch.Tensor:
    """z = f_w(x) for every generic input, in eval mode (eq. 5.22)."""
    with eval_mode(model):
        return torch.cat([model(inputs[i : i + batch_size]) for i in range(0, len(inputs), batch_size)])


def distil(
    model: SplitModel,
    inputs: torch.Tensor,
    consensus: torch.Tensor,
    prototypes: torch.Tensor | None,
    held: torch.Tensor | None,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    beta: float = DEFAULT_BETA,
    generator: torch.Generator,
) -> float:
    """Train ``model`` in place on the generic draw: L_KD to the consensus + β·L_θ on the global prototypes (eqs.
    5.29–5.30); with ``prototypes=None`` just L_KD (FedMD, or FedKAD without prototype regularisation). Returns the
    mean loss."""
    use_prototypes = prototypes is not None
    params = list(model.parameters())
    sgd = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    model.train()
    total, steps = torch.zeros((), device=inputs.device), 0
    for _ in range(epochs):
        order = torch.randperm(len(inputs), generator=generator).to(inputs.device)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            proto = prototype_logits(model, prototypes) if prototypes is not None else None
            loss = fedkad_loss(
                model(inputs[batch]), consensus[batch], proto, held, beta=beta, use_prototypes=use_prototypes
            )
            sgd.zero_grad(set_to_none=True)
            loss.backward()
            sgd.step()
            total, steps = total + loss.detach(), steps + 1
    settle_batchnorm(model, inputs, batch_size=batch_size)
    return float(total) / max(steps, 1)
