"""ALFA-Mix query (Parvaneh et al., CVPR 2022): feature mixing with labelled class anchors.

Candidate selection, as in the authors' ``AlphaMixSampling.query`` with their closed-form variant
(``--alpha_closed_form_approx --alpha_cap 0.2``):

1. Embeddings z of the unlabelled samples, predictions ŷ = argmax f(z) of the classifier f (final Linear), and
   g = ∇_z CE(f(z), ŷ).
2. Anchors z*_c: the mean labelled embedding of class c (of all labelled embeddings if class c has none).
3. For growing caps ε = s, 2s, ... while below 1 (s = 0.2): for each class c, the per-dimension mixing ratio
   α = (ε/√D) · ‖z*_c − z‖ / ‖g‖ · g / (z*_c − z + 1e-8) (their closed-form solution of the α that most
   changes the loss within the ball), the mix z̃ = (1 − α) z + α z*_c, and the sample is a candidate if
   f(z̃) ≠ ŷ for any anchor. The loop stops as soon as there are more candidates than the budget.
   (Up to the 1e-8, α ⊙ (z*_c − z) = ε‖z*_c − z‖ · g/‖g‖: the mix is a step along the loss gradient whose length
   grows with the distance to the anchor.)
4. k-means with min(budget, #candidates) clusters on the L2-normalised candidate embeddings; the candidate
   closest to each centre is queried.
5. If fewer than ``budget`` were chosen, the rest is drawn uniformly from the other unlabelled samples.

Simplified or changed: the learned-α variant (``--alpha_opt``, a few Adam steps on α per anchor) is not
implemented, only the closed form; k-means is one k-means++ seeding plus Lloyd iterations in torch instead of
scikit-learn's ``KMeans`` (several seedings, greedy k-means++); where ‖g‖ = 0 (a saturated prediction) α is 0
instead of NaN; the random top-up draws without replacement (the authors' ``np.random.choice`` could repeat).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from methods.kafal.queries.kmeans import closest_members, kmeans

Classifier = Callable[[torch.Tensor], torch.Tensor]


def alpha_caps(step: float) -> list[float]:
    """The caps the authors' loop visits: ``cap += step`` while ``cap < 1`` (0.2, 0.4, 0.6, 0.8, 1.0 for 0.2)."""
    if not 0 < step <= 1:
        raise ValueError(f"'alfa-mix-alpha-cap' must be in (0, 1], got {step}")
    caps, cap = [], 0.0
    while cap < 1.0:
        cap += step
        caps.append(cap)
    return caps


def class_anchors(labelled: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """C x D mean labelled embedding per class; the mean of all labelled embeddings for classes without any."""
    if len(labelled) == 0:
        raise ValueError("ALFA-Mix needs labelled embeddings for its anchors")
    labels = labels.to(labelled.device)
    sums = torch.zeros(num_classes, labelled.shape[1], dtype=labelled.dtype, device=labelled.device)
    sums.index_add_(0, labels, labelled)
    counts = torch.bincount(labels, minlength=num_classes).to(labelled.dtype).unsqueeze(1)
    return torch.where(counts > 0, sums / counts.clamp(min=1), labelled.mean(dim=0, keepdim=True))


def closed_form_alpha(anchor: torch.Tensor, embeddings: torch.Tensor, grads: torch.Tensor, eps: float) -> torch.Tensor:
    """α = ε · ‖z* − z‖ / ‖g‖ · g / (z* − z + 1e-8), per sample and dimension (0 where ‖g‖ = 0)."""
    z = anchor - embeddings
    grad_norm = grads.norm(dim=1, keepdim=True)
    scale = eps * z.norm(dim=1, keepdim=True) / grad_norm.clamp(min=torch.finfo(grads.dtype).tiny)
    return torch.where(grad_norm > 0, scale * grads / (z + 1e-8), torch.zeros_like(z))


def alfa_mix_candidates(
    unlabelled: torch.Tensor,
    labelled: torch.Tensor,
    labels: torch.Tensor,
    classify: Classifier,
    num_classes: int,
    budget: int,
    cap_step: float = 0.2,
) -> torch.Tensor:
    """Boolean mask of the unlabelled samples whose prediction some anchor mix changes (steps 1-3)."""
    caps = alpha_caps(cap_step)
    with torch.enable_grad():
        z = unlabelled.detach().clone().requires_grad_(True)
        logits = classify(z)
        predicted = logits.argmax(dim=1)
        grads = torch.autograd.grad(F.cross_entropy(logits, predicted, reduction="sum"), z)[0]
    anchors = class_anchors(labelled.to(unlabelled.device), labels, num_classes)
    candidates = torch.zeros(len(unlabelled), dtype=torch.bool, device=unlabelled.device)
    with torch.no_grad():
        for cap in caps:
            eps = cap / math.sqrt(unlabelled.shape[1])
            for anchor in anchors:
                alpha = closed_form_alpha(anchor, unlabelled, grads, eps)
                mixed = (1 - alpha) * unlabelled + alpha * anchor
                candidates |= classify(mixed).argmax(dim=1) != predicted
            if int(candidates.sum()) > budget:
                break
    return candidates


def alfa_mix_query(
    unlabelled: torch.Tensor,
    labelled: torch.Tensor,
    labels: torch.Tensor,
    classify: Classifier,
    num_classes: int,
    budget: int,
    generator: torch.Generator,
    cap_step: float = 0.2,
) -> torch.Tensor:
    """Positions (CPU) of ``budget`` unlabelled samples chosen by ALFA-Mix (steps 1-5)."""
    n = len(unlabelled)
    if not 0 <= budget <= n:
        raise ValueError(f"budget must be in [0, {n}], got {budget}")
    if budget == 0:
        return torch.empty(0, dtype=torch.long)
    candidates = torch.nonzero(
        alfa_mix_candidates(unlabelled, labelled, labels, classify, num_classes, budget, cap_step)
    ).flatten()
    chosen = torch.empty(0, dtype=torch.long)
    if len(candidates) > 0:
        features = F.normalize(unlabelled[candidates].detach(), p=2, dim=1)
        centres, assignment = kmeans(features, min(budget, len(candidates)), generator)
        chosen = candidates[closest_members(features, centres, assignment)].cpu()
    missing = budget - len(chosen)
    if missing > 0:
        taken = torch.zeros(n, dtype=torch.bool)
        taken[chosen] = True
        order = torch.randperm(n, generator=generator)
        chosen = torch.cat([chosen, order[~taken[order]][:missing]])
    return chosen
