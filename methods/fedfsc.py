"""FedFSC / FedFSC+ / FSCProx: few-shot fine-tuning of the classifier (thesis Ch. 4; THESIS-METHODS §1).

Few-shot participants freeze the received base model's extractor φ^t, take its final Linear θ = {W, b} as the
starting point (not a fresh layer), and train θ alone on n shots per eligible local class. The server
averages the few-shot classifiers **uniformly** (eq. 4.2) and returns the global model {θ_fs^t, φ^t}, pairing
them with the extractor they were trained on (the base distributed at round t, not the newly aggregated one).

Decisions where the sources disagree or are silent:
- Class eligibility follows the thesis's code (the text says nothing): a class takes part when it has at
  least n local samples; when no class has, n is lowered until one does (``eligible_classes``).
- Shots are redrawn at the start of every epoch, as the text says (eq. 4.1: "resampled at the start of each
  local training epoch"); the code draws once per round. ``resample_each_epoch=False`` gives the code's rule.
- The few-shot optimiser is the text's SGD (lr 0.01, momentum 0.9, weight decay 1e-3, batch 4, 10 epochs,
  10 shots); the code's dampening 0.9 is not in the text, so dampening defaults to 0.
- FSCProx follows the text's μ_fsc·‖θ − θ_fs‖² (eq. 4.3), not the code's (β/2)·‖θ − θ_fs‖².
- FedFSC+ rounds counts as round(f·N), with at least one non-straggler; roles are drawn afresh every round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from methods.payload_size import state_bytes
from methods.state_averaging import average_states

#: Setting keys named in error messages (the glue's settings use the same names).
NON_STRAGGLER_KEY = "non-straggler-fraction"
FEWSHOT_KEY = "fewshot-fraction"
SHOTS_KEY = "fewshot-shots"
FSCPROX_MU_KEY = "fscprox-mu"

#: Few-shot updates start in round 2: round 1 trains the base model only, to initialise φ (Alg. 1 line 7).
FIRST_FEWSHOT_ROUND = 2


@dataclass(frozen=True)
class FewShotOptimiser:
    """The few-shot update's SGD settings (thesis Table 4.1 and §4.5)."""

    lr: float = 0.01
    momentum: float = 0.9
    dampening: float = 0.0
    weight_decay: float = 1e-3
    batch_size: int = 4
    epochs: int = 10


def eligible_classes(labels: torch.Tensor, shots: int, num_classes: int) -> tuple[torch.Tensor, int]:
    """Which classes take part in the few-shot update, and the shot count actually used.

    A class is eligible when it has ≥ ``shots`` local samples; when none has, the count drops by one until
    some class qualifies (the thesis's code). Returns a boolean mask over ``num_classes`` and that count.
    """
    if shots < 1:
        raise ValueError(f"{SHOTS_KEY} must be >= 1, got {shots}")
    if len(labels) == 0:
        raise ValueError("few-shot update needs at least one labelled sample")
    counts = torch.bincount(labels, minlength=num_classes)
    if len(counts) > num_classes:
        raise ValueError(f"labels reach {len(counts) - 1}, beyond num_classes = {num_classes}")
    used = min(shots, int(counts.max()))
    return counts >= used, used


def draw_shots(labels: torch.Tensor, eligible: torch.Tensor, shots: int, generator: torch.Generator) -> torch.Tensor:
    """Indices of ``shots`` samples drawn uniformly without replacement from each eligible class.

    Vectorised: a random permutation (drawn on the CPU ``generator``) orders the samples within each class, and
    the first ``shots`` of each eligible class are kept. Indices come back grouped by class, ascending class.
    """
    device = labels.device
    shuffled = torch.randperm(len(labels), generator=generator).to(device)
    by_class = shuffled[torch.argsort(labels[shuffled], stable=True)]
    sorted_labels = labels[by_class]
    positions = torch.arange(len(labels), device=device)
    class_start = torch.searchsorted(sorted_labels, sorted_labels, right=False)
    rank = positions - class_start
    keep = (rank < shots) & eligible.to(device)[sorted_labels]
    return by_class[keep]


def train_fewshot_classifier(
    features: torch.Tensor,
    labels: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    *,
    shots: int = 10,
    optimiser: FewShotOptimiser = FewShotOptimiser(),
    generator: torch.Generator,
    resample_each_epoch: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """θ_fs,k: the Linear {W, b} fine-tuned on frozen features of n shots per eligible class (eq. 4.1).

    ``features`` (N × D) are φ^t's outputs entering the Linear layer (``model_outputs.penultimate_features``,
    eval mode); ``weight`` (C × D) and ``bias`` (C) are the base model's classifier, copied and not modified.
    Returns new tensors. ``generator`` (CPU) drives the shot draws and the batch order.
    """
    num_classes = weight.shape[0]
    eligible, used = eligible_classes(labels, shots, num_classes)
    w = weight.detach().clone().requires_grad_(True)
    b = bias.detach().clone().requires_grad_(True)
    sgd = torch.optim.SGD(
        [w, b],
        lr=optimiser.lr,
        momentum=optimiser.momentum,
        dampening=optimiser.dampening,
        weight_decay=optimiser.weight_decay,
    )
    support = draw_shots(labels, eligible, used, generator)
    for epoch in range(optimiser.epochs):
        if resample_each_epoch and epoch > 0:
            support = draw_shots(labels, eligible, used, generator)
        order = support[torch.randperm(len(support), generator=generator).to(support.device)]
        for start in range(0, len(order), optimiser.batch_size):
            batch = order[start : start + optimiser.batch_size]
            loss = F.cross_entropy(F.linear(features[batch], w, b), labels[batch])
            sgd.zero_grad(set_to_none=True)
            loss.backward()
            sgd.step()
    return w.detach(), b.detach()


def average_fewshot_classifiers(classifiers: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """θ_fs^t = (1/|F|) Σ_k θ_fs,k^t: the uniform mean of the few-shot classifiers (eq. 4.2), not size-weighted."""
    return average_states(classifiers)


def compose_global_state(
    base_state: Mapping[str, torch.Tensor], fewshot_classifier: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """w_g^t = {θ_fs^t, φ^t}: the round-t base state with its classifier entries replaced by θ_fs^t.

    ``base_state`` must be the base model *distributed* at round t (the one the few-shot classifiers were
    trained on), not the newly aggregated base. Every key of ``fewshot_classifier`` must exist in the base
    with the same shape.
    """
    for key, value in fewshot_classifier.items():
        if key not in base_state:
            raise ValueError(f"few-shot classifier key {key!r} is not in the base model")
        if base_state[key].shape != value.shape:
            raise ValueError(f"{key}: few-shot shape {tuple(value.shape)} != base shape {tuple(base_state[key].shape)}")
    return {key: fewshot_classifier.get(key, value).clone() for key, value in base_state.items()}


def fscprox_penalty(classifier: Sequence[torch.Tensor], anchor: Sequence[torch.Tensor], mu: float) -> torch.Tensor:
    """μ_fsc · ‖θ − θ_fs‖² over the classifier's tensors (eq. 4.3), added to the full update's loss.

    With the base model's own classifier as ``anchor`` this is baseProx. The anchor carries no gradient.
    """
    if mu < 0:
        raise ValueError(f"{FSCPROX_MU_KEY} must be >= 0, got {mu}")
    return mu * torch.stack([((p - a.detach()) ** 2).sum() for p, a in zip(classifier, anchor, strict=True)]).sum()


@dataclass(frozen=True)
class RoundRoles:
    """FedFSC+ roles for one round (partition ids): full updates, few-shot updates, dropped."""

    full: list[int]
    fewshot: list[int]
    dropped: list[int]


def check_role_fractions(non_straggler_fraction: float, fewshot_fraction: float) -> None:
    """Refuse fractions outside (0, 1] / [0, 1) and f_n + f_fs ≥ 1 (some stragglers are always lost, §4.5.2)."""
    if not 0 < non_straggler_fraction <= 1:
        raise ValueError(f"{NON_STRAGGLER_KEY} must be in (0, 1], got {non_straggler_fraction}")
    if not 0 <= fewshot_fraction < 1:
        raise ValueError(f"{FEWSHOT_KEY} must be in [0, 1), got {fewshot_fraction}")
    if non_straggler_fraction + fewshot_fraction >= 1:
        raise ValueError(
            f"{NON_STRAGGLER_KEY} + {FEWSHOT_KEY} must be < 1 (FedFSC+ drops the remaining stragglers), "
            f"got {non_straggler_fraction} + {fewshot_fraction} = {non_straggler_fraction + fewshot_fraction}"
        )


def assign_roles(
    pool: Sequence[int], non_straggler_fraction: float, fewshot_fraction: float, seed: int, server_round: int
) -> RoundRoles:
    """FedFSC+ (Alg. 2): K = round(f_n·N) random non-stragglers (at least 1), S = round(f_fs·N) random few-shot
    stragglers from the rest, the others dropped. Drawn afresh each round, seeded by (seed, round).

    In round 1 there are no few-shot updates (Alg. 2 line 8): the S stragglers are dropped too.
    """
    check_role_fractions(non_straggler_fraction, fewshot_fraction)
    n = len(pool)
    if n == 0:
        raise ValueError("no clients to assign roles to")
    full_count = max(1, round(non_straggler_fraction * n))
    fewshot_count = min(round(fewshot_fraction * n), n - full_count)
    rng = np.random.default_rng([seed, server_round, 0xF5C])
    order = [int(pool[i]) for i in rng.permutation(n)]
    full = sorted(order[:full_count])
    fewshot = sorted(order[full_count : full_count + fewshot_count])
    dropped = sorted(order[full_count + fewshot_count :])
    if server_round < FIRST_FEWSHOT_ROUND:
        fewshot, dropped = [], sorted(dropped + fewshot)
    return RoundRoles(full=full, fewshot=fewshot, dropped=dropped)


def uplink_bytes(
    state: Mapping[str, torch.Tensor], classifier_keys: Sequence[str], *, full: bool, fewshot: bool
) -> int:
    """Bytes one client uploads: the full model state if it ran a full update, plus the Linear layer if few-shot.

    FedFSC (Alg. 1, round ≥ 2) and FedFSC+(baseline+) stragglers send both: full model + one Linear layer.
    """
    return (state_bytes(state) if full else 0) + (state_bytes(state, classifier_keys) if fewshot else 0)
