"""Split a training set over clients with flwr-datasets' partitioners, and hold out the server's share.

All functions are deterministic for a seed and work on label arrays only, so every node can compute the
same split and keep just its own partition. flwr-datasets (and Hugging Face ``datasets`` with it) is
imported only when a split is computed, so a deployed SuperNode reading its own ``data-path`` never needs it.

``partition_table`` holds every partition at once in two flat arrays (the same partitions as ``partition_indices``,
tested), so that a split over 10,000 clients is one pass of the partitioner and a few hundred kilobytes, which the
processes of a machine share (``data/federated.py``) and from which each client takes only its own slice.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from flwr_datasets.partitioner import Partitioner

PARTITIONERS = ("dirichlet", "pathological", "iid")


class PartitioningError(ValueError):
    """The requested split cannot be made from this data."""


class SplitDrawError(PartitioningError):
    """The partitioner's draws did not meet its constraints (Dirichlet: every client at least ``min-partition-size``
    samples) within its attempts, though the settings are not impossible on their face."""


def split_public(labels: np.ndarray, public_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hold out a stratified ``public_fraction`` of the indices for the server.

    Returns ``(client_indices, public_indices)``, each sorted. Stratified so that the server's share has
    every class in the training set's proportions.
    """
    rng = np.random.default_rng([seed, 0x9B11C])
    public = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        take = int(round(public_fraction * len(members)))
        public.append(rng.choice(members, size=take, replace=False))
    public_idx = np.sort(np.concatenate(public)) if public else np.array([], dtype=np.int64)
    mask = np.ones(len(labels), dtype=bool)
    mask[public_idx] = False
    return np.flatnonzero(mask), public_idx


def _make_partitioner(
    scheme: str,
    num_partitions: int,
    alpha: float,
    min_size: int,
    self_balancing: bool,
    classes_per_client: int,
    seed: int,
) -> Partitioner:
    from flwr_datasets.partitioner import DirichletPartitioner, IidPartitioner, PathologicalPartitioner

    if scheme == "dirichlet":
        return DirichletPartitioner(
            num_partitions, "label", alpha, min_partition_size=min_size, self_balancing=self_balancing, seed=seed
        )
    if scheme == "pathological":
        return PathologicalPartitioner(
            num_partitions, "label", classes_per_client, class_assignment_mode="random", seed=seed
        )
    if scheme == "iid":
        return IidPartitioner(num_partitions)
    raise PartitioningError(f"partitioner {scheme!r} is unknown; allowed: {', '.join(PARTITIONERS)}")


def _prepared_partitioner(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    alpha: float,
    min_size: int,
    self_balancing: bool,
    classes_per_client: int,
    seed: int,
) -> tuple[Partitioner, np.ndarray]:
    """The checked partitioner holding the labels in the order it sees them, and that order (positions)."""
    num_classes = len(np.unique(labels))
    if num_partitions < 1:
        raise PartitioningError(f"num-partitions must be >= 1, got {num_partitions}")
    if num_partitions > len(labels):
        raise PartitioningError(f"{num_partitions} partitions need at least as many samples; there are {len(labels)}")
    if scheme == "dirichlet" and num_partitions * min_size > len(labels):
        raise PartitioningError(
            f"min-partition-size = {min_size} is impossible: {num_partitions} clients x {min_size} "
            f"> {len(labels)} training samples"
        )
    if scheme == "pathological" and not 1 <= classes_per_client <= num_classes:
        raise PartitioningError(f"classes-per-client = {classes_per_client} must be in [1, {num_classes}]")
    partitioner = _make_partitioner(scheme, num_partitions, alpha, min_size, self_balancing, classes_per_client, seed)
    # IidPartitioner takes contiguous shards, so the rows are shuffled first; the others shuffle themselves.
    order = np.random.default_rng([seed, 0x11D]).permutation(len(labels)) if scheme == "iid" else np.arange(len(labels))
    from datasets import Dataset

    partitioner.dataset = Dataset.from_dict({"label": labels[order].tolist(), "position": order.tolist()})
    return partitioner, order


def _split_error(
    labels: np.ndarray, num_partitions: int, scheme: str, alpha: float, min_size: int, err: Exception
) -> PartitioningError:
    """The partitioner's refusal: a ``SplitDrawError`` where Dirichlet draws missed ``min_size``."""
    error = SplitDrawError if scheme == "dirichlet" else PartitioningError
    return error(
        f"cannot split {len(labels)} samples over {num_partitions} clients with {scheme} "
        f"(dirichlet-alpha = {alpha}, min-partition-size = {min_size}): {err}"
    )


def partition_indices(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    *,
    alpha: float = 0.5,
    min_size: int = 0,
    self_balancing: bool = False,
    classes_per_client: int = 2,
    seed: int = 0,
) -> list[np.ndarray]:
    """Positions into ``labels`` for each of ``num_partitions`` clients, each loaded through flwr-datasets'
    ``load_partition``.

    ``dirichlet`` draws per-class proportions from Dir(α), re-drawing until every client has at least
    ``min_size`` samples, optionally with the self-balancing rule; ``pathological`` gives each client
    ``classes_per_client`` labels (#C=k); ``iid`` splits uniformly.
    """
    partitioner, _ = _prepared_partitioner(
        labels, num_partitions, scheme, alpha, min_size, self_balancing, classes_per_client, seed
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [
                np.asarray(partitioner.load_partition(i)["position"], dtype=np.int64) for i in range(num_partitions)
            ]
    except ValueError as err:
        raise _split_error(labels, num_partitions, scheme, alpha, min_size, err) from err


def partition_table(
    labels: np.ndarray,
    num_partitions: int,
    scheme: str,
    *,
    alpha: float = 0.5,
    min_size: int = 0,
    self_balancing: bool = False,
    classes_per_client: int = 2,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``partition_indices`` as one table: ``(positions, offsets)``, partition ``i`` being
    ``positions[offsets[i]:offsets[i + 1]]``.

    The partitioner draws every partition when the first is loaded; the table is read from what it drew (for
    ``iid``, flwr-datasets' contiguous shards of the shuffled rows), instead of materialising a dataset per client.
    """
    partitioner, order = _prepared_partitioner(
        labels, num_partitions, scheme, alpha, min_size, self_balancing, classes_per_client, seed
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if scheme == "iid":
                parts = np.array_split(order, num_partitions)
            else:
                partitioner.load_partition(0)  # draws every partition
                drawn = getattr(partitioner, "_partition_id_to_indices", {})
                parts = [
                    order[np.asarray(drawn[i], dtype=np.int64)]
                    if i in drawn
                    else np.asarray(partitioner.load_partition(i)["position"], dtype=np.int64)
                    for i in range(num_partitions)
                ]
    except ValueError as err:
        raise _split_error(labels, num_partitions, scheme, alpha, min_size, err) from err
    offsets = np.zeros(num_partitions + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64), offsets
