"""BADGE query (Ash et al. 2020): k-means++ seeding on gradient embeddings.

The gradient embedding of a sample is the gradient of the cross-entropy at its own prediction ŷ with respect to the
final Linear layer's weights: g = (p − onehot(ŷ)) ⊗ h, with p the softmax and h the penultimate features
(C·D values, class-major as in the reference code, whose sign convention onehot − p gives the same distances).
The first centre is the largest ‖g‖; each next one is drawn with probability ∝ squared distance to the nearest
chosen centre (the reference ``init_centers``). Distances use ‖a⊗h − b⊗k‖² = ‖a‖²‖h‖² + ‖b‖²‖k‖² − 2(a·b)(h·k),
as the reference code does, so the N x C·D embeddings are never built.
"""

from __future__ import annotations

import torch

from methods.kafal.queries.kmeans import d2_seeding


def gradient_factors(logits: torch.Tensor) -> torch.Tensor:
    """p − onehot(ŷ) per row: the gradient of the cross-entropy at the predicted class w.r.t. the logits."""
    p = torch.softmax(logits, dim=1)
    return p - torch.nn.functional.one_hot(p.argmax(dim=1), p.shape[1]).to(p.dtype)


def gradient_embeddings(logits: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
    """The N x (C·D) gradient embeddings (p − onehot(ŷ)) ⊗ h, class-major."""
    return (gradient_factors(logits).unsqueeze(2) * embeddings.unsqueeze(1)).flatten(1)


def badge_query(
    logits: torch.Tensor, embeddings: torch.Tensor, budget: int, generator: torch.Generator
) -> torch.Tensor:
    """Positions (CPU) of ``budget`` samples chosen by k-means++ seeding on the gradient embeddings."""
    n = len(logits)
    if not 0 <= budget <= n:
        raise ValueError(f"budget must be in [0, {n}], got {budget}")
    if budget == 0:
        return torch.empty(0, dtype=torch.long)
    a = gradient_factors(logits.double())
    h = embeddings.to(a.device).double()
    a_norm, h_norm = (a * a).sum(1), (h * h).sum(1)

    def squared_distance_to(index: torch.Tensor) -> torch.Tensor:
        a_i, h_i = a.index_select(0, index), h.index_select(0, index)
        cross = (a @ a_i.T).squeeze(1) * (h @ h_i.T).squeeze(1)
        return a_norm * h_norm + a_norm[index] * h_norm[index] - 2 * cross

    first = torch.argmax(a_norm * h_norm).view(1)
    return d2_seeding(first, budget, squared_distance_to, n, generator).cpu()
