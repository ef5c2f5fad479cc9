"""A client's labelled and unlabelled pools for federated active learning (KAFAL, Cao et al., ICCV 2023, §3.1 and §4).

Each client starts with a random ``kafal.al-initial-fraction`` (default 0.10) of its local samples labelled and, after
every active-learning cycle, asks an oracle for the labels of ``kafal.al-budget-fraction`` (default 0.05) of its local
data. Both sizes are fractions of the **whole** local dataset, rounded up as in the authors' code
(``np.ceil(BASE / NUM_TRAIN * n)``), after rounding f·n to 9 decimals so that float noise does not add a sample
(0.1·30 is 3, where the authors' float expression 3.0000000000000004 would give 4).

The pool never holds the labels of unlabelled samples: it is built with an ``Oracle`` (local indices -> labels)
and calls it only for samples that are being labelled, so a query strategy cannot read an unlabelled label.
Indices are positions in the client's local dataset (0 .. n-1); they live on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

#: Reveals the labels of the given local indices (1-D int64 CPU tensor) as a 1-D int64 tensor of the same length.
Oracle = Callable[[torch.Tensor], torch.Tensor]


def fraction_of(num_samples: int, fraction: float) -> int:
    """⌈f·n⌉ with f·n rounded to 9 decimals first (0 for an empty dataset)."""
    return math.ceil(round(fraction * num_samples, 9))


def _check_fraction(key: str, fraction: float) -> None:
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"'{key}' must be in (0, 1], got {fraction}")


def initial_labelled_size(num_samples: int, fraction: float) -> int:
    """How many samples a client labels at random before the first cycle: ⌈al-initial-fraction · n⌉."""
    _check_fraction("kafal.al-initial-fraction", fraction)
    return fraction_of(num_samples, fraction)


def query_budget(num_samples: int, fraction: float) -> int:
    """How many samples a client queries per cycle: ⌈al-budget-fraction · n⌉ of its whole local dataset."""
    _check_fraction("kafal.al-budget-fraction", fraction)
    return fraction_of(num_samples, fraction)


class ActivePool:
    """The split of one client's ``num_samples`` local samples into a labelled and an unlabelled pool.

    ``labelled`` keeps the order in which samples were labelled (the initial draw first) and ``labels`` is
    aligned with it; ``unlabelled`` is ascending. The two never overlap and together cover 0 .. n-1.
    """

    def __init__(self, num_samples: int, oracle: Oracle) -> None:
        if num_samples < 0:
            raise ValueError(f"num_samples must be >= 0, got {num_samples}")
        self.num_samples = num_samples
        self._oracle = oracle
        self._is_labelled = torch.zeros(num_samples, dtype=torch.bool)
        self._labelled = torch.empty(0, dtype=torch.long)
        self._labels = torch.empty(0, dtype=torch.long)

    @classmethod
    def draw_initial(
        cls, num_samples: int, initial_fraction: float, oracle: Oracle, generator: torch.Generator
    ) -> ActivePool:
        """A pool whose ⌈al-initial-fraction · n⌉ labelled samples are drawn uniformly with ``generator``."""
        size = initial_labelled_size(num_samples, initial_fraction)
        pool = cls(num_samples, oracle)
        pool.add(torch.randperm(num_samples, generator=generator)[:size])
        return pool

    @classmethod
    def from_arrays(cls, num_samples: int, labelled: np.ndarray, labels: np.ndarray, oracle: Oracle) -> ActivePool:
        """Rebuild a pool saved with ``to_arrays`` (labels already revealed are not asked again)."""
        indices = torch.as_tensor(np.asarray(labelled), dtype=torch.long)
        values = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        if indices.shape != values.shape or indices.dim() != 1:
            raise ValueError(f"labelled {tuple(indices.shape)} and labels {tuple(values.shape)} must be equal 1-D")
        pool = cls(num_samples, oracle)
        pool._check_new(indices)
        pool._append(indices, values)
        return pool

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The labelled indices and their labels, enough to rebuild the pool with ``from_arrays``."""
        return {"labelled": self._labelled.numpy().copy(), "labels": self._labels.numpy().copy()}

    @property
    def labelled(self) -> torch.Tensor:
        """Local indices of the labelled samples, in the order they were labelled."""
        return self._labelled.clone()

    @property
    def labels(self) -> torch.Tensor:
        """Labels of ``labelled``, aligned with it."""
        return self._labels.clone()

    @property
    def unlabelled(self) -> torch.Tensor:
        """Local indices of the unlabelled samples, ascending."""
        return torch.nonzero(~self._is_labelled).flatten()

    def class_counts(self, num_classes: int) -> torch.Tensor:
        """n_c: how many labelled samples of each class the client holds (float32, CPU)."""
        return torch.bincount(self._labels, minlength=num_classes).float()

    def budget(self, budget_fraction: float) -> int:
        """This cycle's query size ⌈al-budget-fraction · n⌉; an error if fewer samples remain unlabelled."""
        size = query_budget(self.num_samples, budget_fraction)
        remaining = self.num_samples - len(self._labelled)
        if size > remaining:
            raise ValueError(
                f"'kafal.al-budget-fraction' = {budget_fraction} asks for {size} of {self.num_samples} samples "
                f"but only {remaining} remain unlabelled; lower it or run fewer cycles"
            )
        return size

    def add(self, indices: torch.Tensor) -> torch.Tensor:
        """Label the unlabelled local ``indices``: ask the oracle, move them to the labelled pool, return the labels."""
        indices = torch.as_tensor(indices, dtype=torch.long).cpu().flatten()
        self._check_new(indices)
        labels = torch.as_tensor(self._oracle(indices.clone()), dtype=torch.long).cpu().flatten()
        if labels.shape != indices.shape:
            raise ValueError(f"the oracle returned {labels.numel()} labels for {indices.numel()} samples")
        self._append(indices, labels)
        return labels.clone()

    def add_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """Label the samples at ``positions`` of ``unlabelled`` (what the query strategies return)."""
        positions = torch.as_tensor(positions, dtype=torch.long).cpu().flatten()
        return self.add(self.unlabelled[positions])

    def _check_new(self, indices: torch.Tensor) -> None:
        if indices.numel() == 0:
            return
        if int(indices.min()) < 0 or int(indices.max()) >= self.num_samples:
            raise ValueError(f"indices must be in [0, {self.num_samples}), got {indices.min()}..{indices.max()}")
        if torch.unique(indices).numel() != indices.numel():
            raise ValueError("indices to label contain duplicates")
        if bool(self._is_labelled[indices].any()):
            raise ValueError("some indices to label are already labelled")

    def _append(self, indices: torch.Tensor, labels: torch.Tensor) -> None:
        self._is_labelled[indices] = True
        self._labelled = torch.cat([self._labelled, indices])
        self._labels = torch.cat([self._labels, labels])
