"""FedSplit's PCA + per-class K-means selection against scikit-learn, and the metadata it yields."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA

from methods.fedsplit.kmeans_selection import (
    CLUSTERS_KEY,
    LEVEL_KEY,
    N_COM_KEY,
    feature_maps_at,
    fit_pca,
    kmeans_plus_plus,
    kmeans_representatives,
    lloyd,
    metadata_bytes,
    nearest_members,
    select_metadata,
)
from models import build_model


def _blobs(seed: int, n: int = 90, dim: int = 12, centres: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(centres, dim)) * 6
    return means[np.arange(n) % centres] + rng.normal(size=(n, dim))


def test_pca_equals_scikit_learn() -> None:
    x = np.random.default_rng(0).normal(size=(50, 20)) @ np.random.default_rng(1).normal(size=(20, 20))
    ours = fit_pca(torch.from_numpy(x), 5)
    ref = PCA(n_components=5, svd_solver="full").fit(x)
    np.testing.assert_allclose(ours.components.numpy(), ref.components_, atol=1e-10)
    np.testing.assert_allclose(ours.explained_variance.numpy(), ref.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ours.transform(torch.from_numpy(x)).numpy(), ref.transform(x), atol=1e-9)


def test_pca_keeps_at_most_as_many_components_as_samples() -> None:
    x = torch.randn(4, 10, dtype=torch.float64)
    assert fit_pca(x, 8).components.shape == (4, 10)


def test_lloyd_from_our_seeding_equals_scikit_learn_from_the_same_start() -> None:
    x = _blobs(0, n=120, centres=4)
    init = kmeans_plus_plus(torch.from_numpy(x), 4, torch.Generator().manual_seed(3))
    centroids, labels = lloyd(torch.from_numpy(x), init)
    ref = KMeans(n_clusters=4, init=init.numpy(), n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(x)
    np.testing.assert_allclose(centroids.numpy(), ref.cluster_centers_, atol=1e-10)
    assert labels.tolist() == ref.labels_.tolist()


def test_seeded_kmeans_recovers_the_partition_scikit_learn_finds() -> None:
    x = _blobs(1, n=90, centres=3)
    init = kmeans_plus_plus(torch.from_numpy(x), 3, torch.Generator().manual_seed(0))
    _, labels = lloyd(torch.from_numpy(x), init)
    ref = KMeans(n_clusters=3, n_init=10, random_state=0).fit(x).labels_
    pairs = {(int(a), int(b)) for a, b in zip(labels.tolist(), ref.tolist(), strict=True)}
    assert len(pairs) == 3  # the same partition up to a renaming of the clusters


def test_kmeans_plus_plus_is_seeded_and_picks_real_samples() -> None:
    x = torch.from_numpy(_blobs(2))
    a = kmeans_plus_plus(x, 5, torch.Generator().manual_seed(0))
    b = kmeans_plus_plus(x, 5, torch.Generator().manual_seed(0))
    c = kmeans_plus_plus(x, 5, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert all(any(torch.equal(centre, row) for row in x) for centre in a)


def test_nearest_members_are_the_cluster_members_closest_to_each_centroid() -> None:
    x = torch.tensor([[0.0], [1.0], [2.9], [3.0], [10.0]], dtype=torch.float64)
    centroids = torch.tensor([[1.0], [3.2], [20.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 1])  # cluster 2 is empty: no sample from it
    assert nearest_members(x, centroids, labels).tolist() == [1, 3]


def test_fewer_samples_than_clusters_keeps_all_of_them() -> None:
    x = torch.randn(3, 4)
    assert kmeans_representatives(x, 5, torch.Generator().manual_seed(0)).tolist() == [0, 1, 2]


def test_selection_returns_real_original_maps_nearest_each_centroid_per_class() -> None:
    rng = np.random.default_rng(5)
    maps = torch.from_numpy(np.concatenate([_blobs(3, n=60, dim=24), _blobs(4, n=45, dim=24)]).reshape(105, 2, 3, 4))
    labels = torch.tensor([0] * 60 + [1] * 45)
    order = torch.from_numpy(rng.permutation(105))
    maps, labels = maps[order], labels[order]
    selection = select_metadata(maps, labels, n_com=6, clusters=3, seed=0)
    assert torch.equal(selection.feature_maps, maps[selection.indices])  # original, unprojected maps
    assert torch.equal(selection.labels, labels[selection.indices])
    assert selection.labels.tolist() == [0, 0, 0, 1, 1, 1]
    # Reference: scikit-learn's PCA on all maps, then scikit-learn's K-means per class.
    flat = maps.flatten(1).numpy()
    projected = PCA(n_components=6, svd_solver="full").fit_transform(flat)
    expected = []
    for label in (0, 1):
        members = np.flatnonzero(labels.numpy() == label)
        km = KMeans(n_clusters=3, n_init=10, random_state=0).fit(projected[members])
        for cluster in range(3):
            inside = members[km.labels_ == cluster]
            distances = np.linalg.norm(projected[inside] - km.cluster_centers_[cluster], axis=1)
            expected.append(int(inside[np.argmin(distances)]))
    assert sorted(selection.indices.tolist()) == sorted(expected)


def test_selection_falls_back_to_all_samples_of_a_small_class() -> None:
    maps = torch.randn(23, 8, dtype=torch.float64)
    labels = torch.tensor([0] * 20 + [1] * 3)
    selection = select_metadata(maps, labels, n_com=4, clusters=5, seed=0)
    assert selection.labels.tolist() == [0] * 5 + [1] * 3
    assert selection.indices[-3:].tolist() == [20, 21, 22]


@pytest.mark.parametrize(("n_com", "clusters", "key"), [(9, 2, N_COM_KEY), (0, 2, N_COM_KEY), (4, 0, CLUSTERS_KEY)])
def test_settings_are_refused_naming_the_key(n_com: int, clusters: int, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        select_metadata(
            torch.randn(10, 2, 2, 2), torch.zeros(10, dtype=torch.long), n_com=n_com, clusters=clusters, seed=0
        )


def test_feature_maps_come_from_the_level_of_the_received_model() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 10).train()
    x = torch.randn(5, 3, 16, 16)
    maps = feature_maps_at(model, x, "mid", batch_size=2)
    assert maps.shape == (5, 32, 8, 8) and model.training
    model.eval()
    torch.testing.assert_close(maps, model.forward_to(x, "mid"))
    with pytest.raises(ValueError, match=LEVEL_KEY):
        feature_maps_at(model, x, "head", batch_size=2)


def test_metadata_bytes_match_the_thesis_arithmetic() -> None:
    assert metadata_bytes(800, (16, 32, 32)) == 800 * 16384 * 4 == 52_428_800
    assert metadata_bytes(50_000, (16, 32, 32)) == 3_276_800_000


def test_float32_maps_select_the_same_samples_as_float64() -> None:
    maps = torch.from_numpy(np.concatenate([_blobs(6, n=40, dim=16), _blobs(7, n=40, dim=16)]))
    labels = torch.tensor([0] * 40 + [1] * 40)
    double = select_metadata(maps, labels, n_com=5, clusters=3, seed=2)
    single = select_metadata(maps.float(), labels, n_com=5, clusters=3, seed=2)
    assert sorted(single.indices.tolist()) == sorted(double.indices.tolist())  # cluster order may differ
    assert single.feature_maps.dtype == torch.float32
