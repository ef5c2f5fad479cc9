"""FedKAD and FedMD: distillation to the client consensus, with prototype feature maps (thesis §5.5, Alg. 4; Li &
Wang 2019, "FedMD: Heterogenous Federated Learning via Model Distillation", and its reference code FedMD_clean).

Client k, after its local epochs, sends per-class prototypes at the penultimate layer (level ``up``: 64×8×8 for
every WRN-d-1): F_{k,c} = mean of f_φ(x) over its samples of class c, zero for an absent class (eq. 5.21). We
send a presence mask with them, so that the server does not have to infer holders from non-zero maps.
Server: F_{g,c} = mean of F_{k,c} over the holders K_c of class c only (eq. 5.26); the consensus on a random
draw of unlabelled generic samples is the uniform mean of the client models' logits (eqs. 5.22–5.23); the
global model (eq. 5.29) and every client model (eq. 5.30) minimise

    L_KD + β · L_θ,   L_KD = mean over samples and logits of |f_w(x_i) − z_con,i| (raw logits, no temperature),
                      L_θ  = mean over the held classes c of CE(θ(F_{g,c}), c) (eq. 5.27).

The scale. Eqs. 5.24 and 5.27 are written as sums (over D_g and the C logits; over the C classes), but §5.5.2 names
the term an "L1 loss" among the library losses it could be swapped for ("the cross entropy loss ... or L2"), §5.6
trains it with mini-batches of 64 at SGD lr 0.1, and FedKAD follows FedMD, whose reference code digests with Keras'
``mean_absolute_error``, a mean over the logits. We take the library losses' means: L_KD per logit (PyTorch's
``l1_loss``), L_θ per held class (``cross_entropy``), β = 1 (CIFAR-10) or 0.5 (GSC), Table 5.9. The sums are a C×
larger step (10× here): measured on the learns-task (tests/learning.py) at §5.6's step, with them round 1's
distillation diverged (L_KD ≈ 4e15) and L_θ stayed at 23.5 ≈ 10·ln 10 (the head no longer separates the prototypes),
every model at chance; with the means, L_KD fell 1.05 → 0.34 and L_θ 1.15 → 0.09 within round 1's five epochs.

FedKAD without prototype regularisation (β = 0, or ``use_prototypes=False``) is FedMD's consensus distillation
("FedMD (global)" adds a global model trained the same way). L_θ skips classes no client holds (their prototype is
undefined).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from methods.common.payload_size import FLOAT32_BYTES, feature_map_bytes
from models.batchnorm import settle_batchnorm
from models.outputs import eval_mode
from models.sgd import SGD
from models.split_model import SplitModel
from models.training import cross_entropy_of, sgd, train_epochs

BETA_KEY = "fedkad.prototype-beta"
GENERIC_SAMPLES_KEY = "fedkad.generic-samples"

#: The thesis splits FedKAD's models at the penultimate feature maps: θ = final BN-ReLU-pool-FC.
PROTOTYPE_LEVEL = "up"
DEFAULT_BETA = 1.0
#: Generic samples drawn per round for distillation (§5.6: 5,000 of CIFAR-100; the default D_g holds 1,000).
DEFAULT_GENERIC_SAMPLES = 1000


def check_fedkad_settings(beta: float, generic_samples: int) -> None:
    """Refuse ``fedkad.prototype-beta`` < 0 and ``fedkad.generic-samples`` < 1."""
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
    """L_KD: the mean absolute error between the student's logits and the consensus, averaged over the batch's
    samples *and* logits (eqs. 5.24–5.25's "L1 loss"; FedMD's digest, Keras' ``mean_absolute_error`` in the
    reference implementation FedMD_clean). The consensus is a fixed target."""
    return F.l1_loss(student_logits, consensus.detach())


def prototype_cross_entropy(prototype_logits: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
    """L_θ: the mean over the held classes of CE(θ(F_{g,c}), c) (eq. 5.27, on the scale of L_KD's per-logit mean);
    ``prototype_logits`` row c is θ(F_{g,c}). Zero when no class is held."""
    classes = torch.arange(len(held), device=prototype_logits.device)
    per_class = F.cross_entropy(prototype_logits, classes, reduction="none")
    return per_class[held].sum() / held.sum().clamp(min=1)


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
    terms = fedkad_terms(student_logits, consensus, prototype_logits, held, beta=beta, use_prototypes=use_prototypes)
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def fedkad_terms(
    student_logits: torch.Tensor,
    consensus: torch.Tensor,
    prototype_logits: torch.Tensor | None = None,
    held: torch.Tensor | None = None,
    *,
    beta: float = DEFAULT_BETA,
    use_prototypes: bool = True,
) -> tuple[torch.Tensor, ...]:
    """(L_KD,) or (L_KD, β·L_θ): the terms of ``fedkad_loss``, so that each can be watched as it is fitted."""
    if beta < 0:
        raise ValueError(f"{BETA_KEY} must be >= 0, got {beta}")
    kd = l1_distillation_loss(student_logits, consensus)
    if not use_prototypes:
        return (kd,)
    if prototype_logits is None or held is None:
        raise ValueError("prototype regularisation needs the prototypes' logits and the held-class mask")
    return kd, beta * prototype_cross_entropy(prototype_logits, held)


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


@dataclass(frozen=True)
class Recipe:
    """How a model is trained on the server: optimiser (``sgd`` or ``adam``), learning rate, epochs, batch size."""

    optimizer: str
    lr: float
    epochs: int
    batch_size: int
    momentum: float = 0.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if self.lr <= 0 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"a recipe needs lr > 0, epochs >= 1 and batch_size >= 1, got {self}")

    def optimizer_for(self, params: list[torch.nn.Parameter]) -> SGD | torch.optim.Optimizer:
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)
        return sgd(params, self.lr, self.momentum, self.weight_decay)


#: FedMD's digest in its reference implementation (FedMD_clean: ``N_logits_matching_round`` = 1,
#: ``logits_matching_batchsize`` = 256, Keras Adam(lr = 1e-3), loss ``mean_absolute_error``).
REFERENCE_DIGEST = Recipe("adam", 1e-3, epochs=1, batch_size=256)
#: FedMD's transfer learning on the labelled public data in FedMD_clean (``pre_train_params``: Adam(1e-3), batch
#: 128, up to 20 epochs with early stopping; the epochs are the ``fedkad.fedmd-public-epochs`` setting).
REFERENCE_PUBLIC_LR, REFERENCE_PUBLIC_BATCH = 1e-3, 128


@dataclass(frozen=True)
class Fit:
    """Per-epoch means of the distillation's terms: L_KD, and β·L_θ (None without prototypes)."""

    kd: tuple[float, ...]
    prototype: tuple[float, ...] | None

    def report(self) -> dict[str, float]:
        """The first and last epochs' means: ``kd_loss_first``/``kd_loss_last`` (and ``prototype_loss_*``)."""
        fields = {"kd_loss_first": self.kd[0], "kd_loss_last": self.kd[-1]}
        if self.prototype is not None:
            fields |= {"prototype_loss_first": self.prototype[0], "prototype_loss_last": self.prototype[-1]}
        return fields


def distil(
    model: SplitModel,
    inputs: torch.Tensor,
    consensus: torch.Tensor,
    prototypes: torch.Tensor | None,
    held: torch.Tensor | None,
    *,
    recipe: Recipe,
    beta: float = DEFAULT_BETA,
    generator: torch.Generator,
) -> Fit:
    """Train ``model`` in place on the generic draw: L_KD to the consensus + β·L_θ on the global prototypes (eqs.
    5.29–5.30); with ``prototypes=None`` just L_KD (FedMD's digest, or FedKAD without prototype regularisation).
    Ends with its BatchNorm statistics settled on the draw. Returns each term's mean per epoch."""
    use_prototypes = prototypes is not None
    optimizer = recipe.optimizer_for(list(model.parameters()))
    model.train()
    per_epoch: list[torch.Tensor] = []
    for _ in range(recipe.epochs):
        order = torch.randperm(len(inputs), generator=generator).to(inputs.device)
        sums = torch.zeros(2 if use_prototypes else 1, device=inputs.device)
        steps = 0
        for start in range(0, len(order), recipe.batch_size):
            batch = order[start : start + recipe.batch_size]
            proto = prototype_logits(model, prototypes) if prototypes is not None else None
            terms = fedkad_terms(
                model(inputs[batch]), consensus[batch], proto, held, beta=beta, use_prototypes=use_prototypes
            )
            loss = sum(terms, torch.zeros((), device=inputs.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            sums += torch.stack([t.detach() for t in terms])
            steps += 1
        per_epoch.append(sums / max(steps, 1))
    settle_batchnorm(model, inputs, batch_size=recipe.batch_size)
    means = torch.stack(per_epoch).cpu().tolist()
    return Fit(tuple(m[0] for m in means), tuple(m[1] for m in means) if use_prototypes else None)


def transfer_on_public(
    model: SplitModel, inputs: torch.Tensor, labels: torch.Tensor, *, epochs: int, generator: torch.Generator
) -> float:
    """FedMD's transfer learning, its first half: train the whole model on the labelled public data (cross-entropy,
    Adam(1e-3), batch 128, as FedMD_clean pretrains its parties), then settle its BatchNorm statistics on that data.
    Returns the mean loss."""
    model.train()
    params = list(model.parameters())
    loss = train_epochs(
        cross_entropy_of(model),
        params,
        inputs,
        labels,
        epochs=epochs,
        batch_size=REFERENCE_PUBLIC_BATCH,
        generator=generator,
        optimizer=torch.optim.Adam(params, lr=REFERENCE_PUBLIC_LR),
    )
    settle_batchnorm(model, inputs)
    return loss
