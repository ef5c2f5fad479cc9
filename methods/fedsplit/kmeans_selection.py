"""FedSplit's K-means feature-map selection (thesis §6.2, Alg. 5), in pure torch.

A client extracts feature maps of all its samples at level l (low / mid / up) with the *received* global
model's φ, flattens them, projects them with PCA to ``fedsplit.n-com`` dimensions, runs K-means with
``fedsplit.k-means-clusters`` clusters separately on each class, and keeps, for every cluster, the real sample closest
(Euclidean, in the PCA space the clustering saw) to the centroid among the cluster's members. The metadata are
those samples' *original* (not projected) maps with their labels.

Decisions where the thesis is silent:
- PCA is fitted once per client on all its flattened maps (the text applies PCA "before clustering" and then
  clusters per class). With fewer samples than ``fedsplit.n-com`` the projection keeps min(n-com, samples) components;
  the dropped ones carry no variance, so distances are unchanged.
- K-means: plain k-means++ seeding (one candidate per step; scikit-learn's default is the greedy variant)
  drawn from a seeded CPU generator, then Lloyd iterations until the assignment stops changing or
  ``max_iter``. An empty cluster keeps its centroid and contributes no sample.
- Fallback: a class with no more samples than clusters keeps all its samples (K-means with K ≥ n puts every
  sample in its own cluster, so each sample is its own nearest member).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from methods.common.payload_size import FLOAT32_BYTES, feature_map_bytes
from models.outputs import extract_in_batches
from models.split_model import SplitModel

N_COM_KEY = "fedsplit.n-com"
CLUSTERS_KEY = "fedsplit.k-means-clusters"
LEVEL_KEY = "common.metadata-level"

#: Values of §6.3.2's main run.
DEFAULT_N_COM = 200
DEFAULT_CLUSTERS = 20


@dataclass(frozen=True)
class PCAProjection:
    """A fitted PCA: x ↦ (x − mean) @ componentsᵀ, components as rows (largest variance first)."""

    mean: torch.Tensor
    components: torch.Tensor
    explained_variance: torch.Tensor

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) @ self.components.T


@dataclass(frozen=True)
class MetadataSelection:
    """The selected samples: their indices into the client's data, original feature maps and labels."""

    indices: torch.Tensor
    feature_maps: torch.Tensor
    labels: torch.Tensor


def check_selection_settings(n_com: int, clusters: int, feature_size: int) -> None:
    """Refuse ``fedsplit.n-com`` outside 1..feature size and ``fedsplit.k-means-clusters`` < 1, naming the key."""
    if clusters < 1:
        raise ValueError(f"{CLUSTERS_KEY} must be >= 1, got {clusters}")
    if n_com < 1:
        raise ValueError(f"{N_COM_KEY} must be >= 1, got {n_com}")
    if n_com > feature_size:
        raise ValueError(
            f"{N_COM_KEY} = {n_com} is larger than the flattened feature-map size {feature_size} at this level; "
            f"choose {N_COM_KEY} <= {feature_size}"
        )


def feature_maps_at(model: SplitModel, inputs: torch.Tensor, level: str, batch_size: int) -> torch.Tensor:
    """F_k^t (eq. 6.3): φ's output at ``level`` for every sample, in eval mode, with the received model."""
    if level not in model.levels:
        raise ValueError(f"{LEVEL_KEY} must be one of {', '.join(model.levels)}, got {level!r}")
    return extract_in_batches(model, inputs, level, batch_size)


def fit_pca(x: torch.Tensor, n_components: int) -> PCAProjection:
    """PCA of the rows of ``x`` (N × D) by SVD of the centred data, scikit-learn's sign convention.

    Each component's largest-magnitude entry is made positive (scikit-learn ≥ 1.5, ``svd_flip`` with
    ``u_based_decision=False``). ``n_components`` is capped at min(N, D).
    """
    k = min(n_components, x.shape[0], x.shape[1])
    mean = x.mean(dim=0)
    _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
    components = vh[:k]
    signs = torch.sign(components.gather(1, components.abs().argmax(dim=1, keepdim=True)))
    components = components * torch.where(signs == 0, torch.ones_like(signs), signs)
    variance = s[:k] ** 2 / max(x.shape[0] - 1, 1)
    return PCAProjection(mean=mean, components=components, explained_variance=variance)


def kmeans_plus_plus(x: torch.Tensor, clusters: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding: the first centre uniform, each next one with probability ∝ D(x)² to the nearest centre.

    The uniforms are drawn on the CPU ``generator`` up front and moved to ``x``'s device; the draws are made by
    inverse-CDF search on the device, so there is no host synchronisation.
    """
    n = x.shape[0]
    uniforms = torch.rand(clusters, generator=generator, dtype=x.dtype).to(x.device)
    first = torch.clamp((uniforms[0] * n).long(), max=n - 1)
    centres = [x[first]]
    nearest = ((x - centres[0]) ** 2).sum(dim=1)
    for j in range(1, clusters):
        cdf = torch.cumsum(nearest, dim=0)
        index = torch.clamp(torch.searchsorted(cdf, uniforms[j] * cdf[-1], right=True), max=n - 1)
        centres.append(x[index])
        nearest = torch.minimum(nearest, ((x - centres[-1]) ** 2).sum(dim=1))
    return torch.stack(centres)


def lloyd(
    x: torch.Tensor, centroids: torch.Tensor, max_iter: int = 300, check_every: int = 10
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd iterations from ``centroids``: assign to the nearest centroid, move each centroid to its members' mean.

    Stops when the assignment no longer changes (checked every ``check_every`` iterations, to limit host
    synchronisations; a converged assignment is a fixed point, so extra iterations change nothing) or after
    ``max_iter``. Empty clusters keep their centroid. Returns (centroids, labels) for the final centroids.
    """
    clusters = centroids.shape[0]
    labels = torch.cdist(x, centroids).argmin(dim=1)
    for iteration in range(1, max_iter + 1):
        sums = torch.zeros_like(centroids).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=clusters).to(x.dtype).unsqueeze(1)
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
        new_labels = torch.cdist(x, centroids).argmin(dim=1)
        converged = iteration % check_every == 0 and torch.equal(new_labels, labels)
        labels = new_labels
        if converged:
            break
    return centroids, labels


def nearest_members(x: torch.Tensor, centroids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """For each non-empty cluster, the index of its member closest to its centroid (ascending cluster order)."""
    clusters = centroids.shape[0]
    distances = torch.cdist(centroids, x)
    members = labels.unsqueeze(0) == torch.arange(clusters, device=x.device).unsqueeze(1)
    distances = distances.masked_fill(~members, float("inf"))
    chosen = distances.argmin(dim=1)
    return chosen[members.any(dim=1)]


def kmeans_representatives(
    x: torch.Tensor, clusters: int, generator: torch.Generator, max_iter: int = 300
) -> torch.Tensor:
    """Indices of the real samples nearest each K-means centroid of the rows of ``x`` (all rows when N ≤ K)."""
    n = x.shape[0]
    if n <= clusters:
        return torch.arange(n, device=x.device)
    centroids, labels = lloyd(x, kmeans_plus_plus(x, clusters, generator), max_iter=max_iter)
    return nearest_members(x, centroids, labels)


def select_metadata(
    feature_maps: torch.Tensor,
    labels: torch.Tensor,
    *,
    n_com: int = DEFAULT_N_COM,
    clusters: int = DEFAULT_CLUSTERS,
    seed: int,
    max_iter: int = 300,
) -> MetadataSelection:
    """D_k,meta^t (eq. 6.4): PCA to ``n_com`` dims, K-means per class, the member nearest each centroid.

    ``feature_maps`` are the client's original maps (N × C × H × W, or any N × …); the selection returns a subset
    of them, unprojected, with their labels, ordered by class then cluster. ``seed`` seeds the K-means++ draws.
    """
    flat = feature_maps.flatten(1)
    check_selection_settings(n_com, clusters, flat.shape[1])
    if len(labels) != len(flat):
        raise ValueError(f"{len(labels)} labels for {len(flat)} feature maps")
    projected = fit_pca(flat, n_com).transform(flat)
    generator = torch.Generator().manual_seed(seed)
    chosen = []
    for label in torch.unique(labels).tolist():
        members = torch.nonzero(labels == label).squeeze(1)
        chosen.append(members[kmeans_representatives(projected[members], clusters, generator, max_iter)])
    indices = torch.cat(chosen) if chosen else torch.zeros(0, dtype=torch.long, device=labels.device)
    return MetadataSelection(indices=indices, feature_maps=feature_maps[indices], labels=labels[indices])


def metadata_bytes(selection_size: int, map_shape: Sequence[int], *, value_bytes: int = FLOAT32_BYTES) -> int:
    """Uplink bytes of the selected maps (float32 values, labels not counted, as the thesis counts them)."""
    return feature_map_bytes(selection_size, map_shape, value_bytes=value_bytes)
