"""D²-sampling seeding (k-means++) and Lloyd's k-means in torch, shared by BADGE and ALFA-Mix.

Every step stays on the points' device; the uniform draws are made on the CPU from a ``torch.Generator`` (all at
once) and moved to the device, so no step reads a value back to the host except Lloyd's convergence check
(once per iteration).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

#: Squared distances from every point to the point at the given (1-element) index.
SquaredDistanceTo = Callable[[torch.Tensor], torch.Tensor]

_MAX_BLOCK = 1 << 24  # elements of one block of a distance matrix


def d2_seeding(
    first: torch.Tensor,
    num_centres: int,
    squared_distance_to: SquaredDistanceTo,
    num_points: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Indices of ``num_centres`` distinct points: ``first`` (1 element), then each next one drawn with probability
    proportional to its squared distance to the nearest chosen point (Arthur & Vassilvitskii's D² sampling).

    Points at distance 0 from every chosen point are drawn (uniformly) only when no other point is left.
    """
    if not 1 <= num_centres <= num_points:
        raise ValueError(f"number of centres must be in [1, {num_points}], got {num_centres}")
    device = first.device
    uniforms = torch.rand(num_centres, generator=generator, dtype=torch.float64).to(device)
    chosen = torch.empty(num_centres, dtype=torch.long, device=device)
    chosen[:1] = first
    available = torch.ones(num_points, dtype=torch.bool, device=device)
    available[first] = False
    nearest = squared_distance_to(first).double().clamp(min=0)
    tiny = torch.finfo(torch.float64).tiny
    for k in range(1, num_centres):
        weights = torch.where(available, nearest + tiny, torch.zeros_like(nearest))
        cumulative = weights.cumsum(0)
        target = (uniforms[k] * cumulative[-1]).view(1)
        index = torch.searchsorted(cumulative, target, right=True).clamp(max=num_points - 1)
        chosen[k : k + 1] = index
        available[index] = False
        nearest = torch.minimum(nearest, squared_distance_to(index).double().clamp(min=0))
    return chosen


def squared_distances(points: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """N x K squared Euclidean distances (by the expansion ‖x‖² + ‖c‖² − 2x·c, clamped at 0)."""
    sq = (points * points).sum(1, keepdim=True) + (centres * centres).sum(1) - 2 * points @ centres.T
    return sq.clamp(min=0)


def nearest_centres(points: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each point, the index of its nearest centre and the squared distance to it (computed in blocks)."""
    block = max(1, _MAX_BLOCK // max(1, len(centres)))
    labels, dists = [], []
    for start in range(0, len(points), block):
        d = squared_distances(points[start : start + block], centres)
        dist, label = d.min(dim=1)
        labels.append(label)
        dists.append(dist)
    return torch.cat(labels), torch.cat(dists)


def kmeans(
    points: torch.Tensor, num_clusters: int, generator: torch.Generator, max_iter: int = 300
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's k-means from a k-means++ seeding (first centre uniform); returns centres (K x D) and labels (N).

    Stops when no label changes or after ``max_iter`` iterations. An empty cluster keeps its previous centre.
    """
    device = points.device
    n = len(points)
    first = torch.randint(0, n, (1,), generator=generator).to(device)

    def squared_distance_to(index: torch.Tensor) -> torch.Tensor:
        return ((points - points.index_select(0, index)) ** 2).sum(1)

    centres = points.index_select(0, d2_seeding(first, num_clusters, squared_distance_to, n, generator)).clone()
    labels, _ = nearest_centres(points, centres)
    for _ in range(max_iter):
        sums = torch.zeros_like(centres).index_add_(0, labels, points)
        counts = torch.bincount(labels, minlength=num_clusters).to(points.dtype).unsqueeze(1)
        centres = torch.where(counts > 0, sums / counts.clamp(min=1), centres)
        new_labels, _ = nearest_centres(points, centres)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
    return centres, labels


def closest_members(points: torch.Tensor, centres: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """For each non-empty cluster, in cluster order, the index of its member closest to the centre (lowest on ties)."""
    dist = ((points - centres[labels]) ** 2).sum(1)
    k, n = len(centres), len(points)
    best = torch.full((k,), float("inf"), dtype=dist.dtype, device=dist.device).scatter_reduce(
        0, labels, dist, reduce="amin"
    )
    is_best = dist == best[labels]
    index = torch.arange(n, device=points.device)
    first = torch.full((k,), n, dtype=torch.long, device=points.device).scatter_reduce(
        0, labels[is_best], index[is_best], reduce="amin"
    )
    return first[first < n]
