"""The selection rules of benchmarks/eds_variants.py: exact picks on toy inputs."""

from __future__ import annotations

import pytest
import torch

from benchmarks.eds_variants import (
    class_quotas,
    select_band,
    select_excluding,
    select_lowest,
    select_stratified,
    spearman,
    total_variation,
)

ENTROPIES = torch.tensor([0.9, 0.1, 0.8, 0.5, 0.7])  # ranking: 0, 2, 4, 3, 1


def test_excluding_skips_last_rounds_picks_and_fills_from_them() -> None:
    assert select_excluding(ENTROPIES, 2, [0]).tolist() == [2, 4]
    assert select_excluding(ENTROPIES, 2, []).tolist() == [0, 2]
    assert select_excluding(ENTROPIES, 2, [0, 2, 4, 3]).tolist() == [1, 0]  # one left: the top excluded fills


LABELS = [0, 0, 0, 0, 0, 0, 1, 1, 1, 2]


def test_class_quotas_are_proportional_with_largest_remainders() -> None:
    # exact shares 1.8, 0.9, 0.3 of 3: floors 1, 0, 0; the two largest remainders (0.9, 0.8) get one more
    assert class_quotas(LABELS, 3) == {0: 2, 1: 1, 2: 0}
    assert class_quotas(LABELS, 10) == {0: 6, 1: 3, 2: 1}
    assert class_quotas([0, 1], 1) == {0: 1, 1: 0}  # a remainder tie: equal counts, the lower label


def test_stratified_takes_the_top_entropy_within_each_class() -> None:
    entropies = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.95, 0.05, 0.07, 0.99])
    # plain top-3 is [9, 6, 5]; class 2 has no quota, class 1 one (6), class 0 two (5, 4)
    assert select_stratified(entropies, LABELS, 3).tolist() == [6, 5, 4]
    # picked before: 5 and 6 go behind every unpicked sample of their classes, so class 1 gets 8 (not 6)
    assert select_stratified(entropies, LABELS, 3, [5, 6]).tolist() == [4, 3, 8]


def test_band_is_the_ranks_just_below_the_top() -> None:
    assert select_band(ENTROPIES, 2).tolist() == [4, 3]
    assert select_band(ENTROPIES, 3).tolist() == [4, 3, 1]  # fewer than 2·size samples: the last size ranks


def test_lowest() -> None:
    assert select_lowest(ENTROPIES, 2).tolist() == [1, 3]


def test_spearman_and_total_variation() -> None:
    x = torch.tensor([1.0, 2.0, 3.0, 5.0])
    assert spearman(x, x.exp()) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(0.8660254)
    assert total_variation([0, 0], [0, 1]) == pytest.approx(0.5)
    assert total_variation([0, 1], [1, 0]) == 0.0
