"""Core-set query (Sener & Savarese 2018): greedy k-centre on penultimate features.

The labelled pool's embeddings are the initial centres; each step picks the unlabelled sample farthest (Euclidean)
from its nearest centre and makes it a centre, as the reference implementation's ``furthest_first`` does. With an
empty labelled pool the first pick is position 0 (all distances are infinite), as there.
"""

from __future__ import annotations

import torch

from methods.kafal.queries.kmeans import nearest_centres


def kcenter_greedy(unlabelled: torch.Tensor, labelled: torch.Tensor, budget: int) -> torch.Tensor:
    """Positions (CPU) of ``budget`` unlabelled embeddings (N x D) chosen greedily, in the order they were chosen."""
    n = len(unlabelled)
    if not 0 <= budget <= n:
        raise ValueError(f"budget must be in [0, {n}], got {budget}")
    device = unlabelled.device
    if len(labelled) > 0:
        _, nearest = nearest_centres(unlabelled, labelled.to(device))
        nearest = nearest.sqrt()
    else:
        nearest = torch.full((n,), float("inf"), dtype=unlabelled.dtype, device=device)
    chosen = torch.empty(budget, dtype=torch.long, device=device)
    for k in range(budget):
        index = torch.argmax(nearest).view(1)
        chosen[k : k + 1] = index
        distance = torch.linalg.vector_norm(unlabelled - unlabelled.index_select(0, index), dim=1)
        nearest = torch.minimum(nearest, distance).index_fill_(0, index, -1.0)
    return chosen.cpu()
