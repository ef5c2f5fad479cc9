"""Robust aggregation rules against hand-computed results on tiny arrays, and the settings check."""

from __future__ import annotations

import numpy as np
import pytest

from strategies.robust_aggregation import (
    AggregationSettings,
    cap_weights,
    client_updates,
    clip_factors,
    integer_arrays,
    krum_select,
    min_clients,
    robust_aggregate,
    settings_problem,
    update_norms,
)

GLOBAL = {"w": np.array([1.0, 1.0], dtype=np.float32)}


def clients(*updates: list[float]) -> list[dict[str, np.ndarray]]:
    """Client arrays θ_k = GLOBAL + Δ_k."""
    return [{"w": (GLOBAL["w"] + np.array(u)).astype(np.float32)} for u in updates]


def one_dim(*values: float) -> list[dict[str, np.ndarray]]:
    return [{"w": np.array([v], dtype=np.float32)} for v in values]


def test_updates_and_norms_are_over_the_float_arrays_in_float64() -> None:
    sent = {"w": np.zeros(2, np.float32), "b": np.ones(1, np.float32), "n": np.array(3, np.int64)}
    reply = {"w": np.array([3.0, 0.0], np.float32), "b": np.array([5.0], np.float32), "n": np.array(9, np.int64)}
    (update,) = client_updates([reply], sent)
    assert set(update) == {"w", "b"} and update["w"].dtype == np.float64
    np.testing.assert_array_equal(update["b"], [4.0])
    assert update_norms([update])[0] == 5.0  # sqrt(3² + 4²)


def test_clip_factors_scale_norms_above_the_multiple_of_the_median_to_it() -> None:
    # median of (5, 1, 1, 2) is 1.5; bound 2 · 1.5 = 3: only the first is scaled, by 3/5
    np.testing.assert_allclose(clip_factors(np.array([5.0, 1.0, 1.0, 2.0]), 2.0), [0.6, 1.0, 1.0, 1.0])


def test_weights_are_capped_at_the_multiple_of_the_median_weight() -> None:
    np.testing.assert_array_equal(cap_weights(np.array([10, 20, 30, 1000]), 2.0), [10, 20, 30, 50])  # median 25


def test_clipped_mean_clips_the_outlier_and_caps_its_weight() -> None:
    replies = clients([3.0, 4.0], [0.0, 1.0], [1.0, 0.0], [0.0, -2.0])
    settings = AggregationSettings("clipped-mean", clip_multiple=2.0, weight_cap_multiple=2.0)
    result = robust_aggregate(settings, replies, [1, 1, 1, 1], GLOBAL)
    # Δ_0 = (3, 4) clipped to norm 3 -> (1.8, 2.4); mean of (1.8, 2.4), (0, 1), (1, 0), (0, −2) = (0.7, 0.35)
    np.testing.assert_allclose(result.arrays["w"], [1.7, 1.35], rtol=1e-6)
    assert result.arrays["w"].dtype == np.float32
    assert result.clipped == [0] and result.weight_capped == [] and result.median_update_norm == 1.5
    result = robust_aggregate(settings, replies, [1, 1, 1, 100], GLOBAL)
    # weights (1, 1, 1, 100) capped at 2 · median 1 = 2: (1.8 + 0 + 1 + 0, 2.4 + 1 + 0 − 4) / 5
    np.testing.assert_allclose(result.arrays["w"], [1 + 2.8 / 5, 1 - 0.6 / 5], rtol=1e-6)
    assert result.weight_capped == [3]
    assert result.report([10, 11, 12, 13]) == {"median_update_norm": 1.5, "clipped": [10], "weight_capped": [13]}


def test_clipped_mean_of_honest_updates_inside_the_bounds_is_the_weighted_mean() -> None:
    replies = clients([1.0, 0.0], [0.0, 2.0], [1.0, 1.0])
    settings = AggregationSettings(clip_multiple=2.0, weight_cap_multiple=2.0)  # norms (1, 2, √2), weights (1, 2, 3)
    result = robust_aggregate(settings, replies, [1, 2, 3], GLOBAL)
    expected = 1 + (np.array([1.0, 0.0]) + 2 * np.array([0.0, 2.0]) + 3 * np.array([1.0, 1.0])) / 6
    np.testing.assert_allclose(result.arrays["w"], expected, rtol=1e-6)
    assert result.clipped == [] and result.weight_capped == []


def test_huge_values_are_clipped_to_a_finite_update() -> None:
    replies = clients([0.1, 0.0], [0.0, 0.1], [0.1, 0.1]) + [{"w": np.full(2, 1e20, np.float32)}]
    result = robust_aggregate(AggregationSettings(), replies, [1, 1, 1, 1], GLOBAL)
    assert np.isfinite(result.arrays["w"]).all() and np.abs(result.arrays["w"] - 1).max() < 0.2
    assert result.clipped == [2, 3]  # norms (0.1, 0.1, 0.141, 2e20): the bound is their median, 0.121


def test_median_is_coordinate_wise_and_unweighted() -> None:
    replies = clients([1.0, 5.0], [2.0, -1.0], [10.0, 0.0])
    result = robust_aggregate(AggregationSettings("median"), replies, [1, 1, 1000], GLOBAL)
    np.testing.assert_allclose(result.arrays["w"], [3.0, 1.0])  # Δ median (2, 0)
    even = robust_aggregate(
        AggregationSettings("median"), one_dim(0, 1, 3, 100), [1] * 4, {"w": np.zeros(1, np.float32)}
    )
    np.testing.assert_allclose(even.arrays["w"], [2.0])  # mean of the middle two


def test_trimmed_mean_cuts_the_fraction_from_each_end() -> None:
    sent = {"w": np.zeros(1, np.float32)}
    values = one_dim(1, 2, 3, 4, 100)
    result = robust_aggregate(AggregationSettings("trimmed-mean", trim_fraction=0.2), values, [1] * 5, sent)
    np.testing.assert_allclose(result.arrays["w"], [3.0])  # ⌊0.2 · 5⌋ = 1 cut at each end: mean(2, 3, 4)
    result = robust_aggregate(AggregationSettings("trimmed-mean", trim_fraction=0.4), values, [1] * 5, sent)
    np.testing.assert_allclose(result.arrays["w"], [3.0])  # 2 cut at each end: the median


def krum_updates() -> list[dict[str, np.ndarray]]:
    # squared distances: a–b 1, a–c 4, a–d 18, b–c 5, b–d 13, c–d 10; e is far from all
    return clients([0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [100.0, 100.0])


def test_krum_scores_pick_the_update_closest_to_its_neighbours() -> None:
    updates = client_updates(krum_updates(), GLOBAL)
    # f = 1, n = 5: each scores its n − f − 2 = 2 nearest: a 1+4 = 5, b 1+5 = 6, c 4+5 = 9, d 10+13 = 23
    assert krum_select(updates, 1, 1) == [0]
    assert krum_select(updates, 1, 2) == [0, 1]
    result = robust_aggregate(AggregationSettings("krum", byzantine_clients=1), krum_updates(), [1] * 5, GLOBAL)
    np.testing.assert_array_equal(result.arrays["w"], GLOBAL["w"])
    assert result.selected == [0]


def test_multi_krum_keeps_n_minus_f_and_averages_them_with_capped_weights() -> None:
    settings = AggregationSettings("multi-krum", byzantine_clients=1, weight_cap_multiple=2.0)
    result = robust_aggregate(settings, krum_updates(), [1, 1, 1, 1, 1], GLOBAL)
    assert result.selected == [0, 1, 2, 3]
    np.testing.assert_allclose(result.arrays["w"], [1 + 4 / 4, 1 + 5 / 4])
    result = robust_aggregate(settings, krum_updates(), [1, 1, 1, 1000, 1], GLOBAL)  # d's weight capped at 2
    np.testing.assert_allclose(result.arrays["w"], [1 + (1 + 2 * 3) / 5, 1 + (2 + 2 * 3) / 5])
    assert result.report([5, 6, 7, 8, 9]) == {"selected": [5, 6, 7, 8]}


def test_bulyan_averages_the_values_closest_to_the_median_of_the_krum_selection() -> None:
    # n = 7, f = 1: Multi-Krum keeps 5 (scores over the 4 nearest: 0→66, 1→43, 2→30, 5→51, 6→78, 50 and −60
    # far larger), their median is 2, and the mean of the 3 values closest to it (2, 1, 0) is 1
    sent = {"w": np.zeros(1, np.float32)}
    result = robust_aggregate(
        AggregationSettings("bulyan", byzantine_clients=1), one_dim(0, 1, 2, 5, 6, 50, -60), [1] * 7, sent
    )
    np.testing.assert_allclose(result.arrays["w"], [1.0])
    assert result.selected == [0, 1, 2, 3, 4]


def test_integer_buffers_take_the_lower_median_and_keep_their_dtype() -> None:
    sent = {"w": np.zeros(1, np.float32), "n": np.array(10, np.int64)}
    replies = [{"w": np.ones(1, np.float32), "n": np.array(v, np.int64)} for v in (16, 13, 10, 20)]
    assert integer_arrays(replies, sent) == {"n": 13}
    for rule in ("clipped-mean", "median", "trimmed-mean"):
        result = robust_aggregate(AggregationSettings(rule, trim_fraction=0.25), replies, [1, 2, 3, 4], sent)
        assert list(result.arrays) == ["w", "n"] and result.arrays["n"].dtype == np.int64 and result.arrays["n"] == 13
        np.testing.assert_allclose(result.arrays["w"], [1.0])


def test_mean_is_left_to_flower_and_too_few_updates_are_refused() -> None:
    with pytest.raises(ValueError, match="'mean' is Flower's aggregate_arrayrecords"):
        robust_aggregate(AggregationSettings("mean"), clients([0.0, 0.0]), [1], GLOBAL)
    with pytest.raises(ValueError, match="'krum' cannot aggregate 4 updates"):
        robust_aggregate(AggregationSettings("krum", byzantine_clients=1), clients(*[[0.0, 0.0]] * 4), [1] * 4, GLOBAL)


def test_min_clients_per_rule() -> None:
    assert [
        min_clients(AggregationSettings(rule, byzantine_clients=2))
        for rule in ("clipped-mean", "median", "trimmed-mean", "krum", "multi-krum", "bulyan")
    ] == [1, 1, 1, 7, 7, 11]


@pytest.mark.parametrize(
    ("settings", "cohort", "message"),
    [
        (AggregationSettings("fedavg"), 8, "'aggregation' = 'fedavg' is invalid: it must be one of clipped-mean, mean"),
        (AggregationSettings(clip_multiple=0.0), 8, "'clip-multiple' = 0.0 is invalid: it must be > 0"),
        (
            AggregationSettings("trimmed-mean", trim_fraction=0.5),
            8,
            "'trim-fraction' = 0.5 is invalid: it must be in [0, 0.5), so that at least one client is left",
        ),
        (
            AggregationSettings("trimmed-mean", trim_fraction=0.1),
            8,
            "'trim-fraction' = 0.1 trims no client of a round of 8 (⌊0.1 · 8⌋ = 0)",
        ),
        (
            AggregationSettings("krum", byzantine_clients=3),
            8,
            (
                "'byzantine-clients' = 3 is too many for 'aggregation' = 'krum' with 8 clients per round: it needs at "
                "least 2f + 3 = 9"
            ),
        ),
        (
            AggregationSettings("bulyan", byzantine_clients=2),
            10,
            (
                "'byzantine-clients' = 2 is too many for 'aggregation' = 'bulyan' with 10 clients per round: it needs "
                "at least 4f + 3 = 11"
            ),
        ),
    ],
)
def test_settings_problem_names_the_key(settings: AggregationSettings, cohort: int, message: str) -> None:
    problem = settings_problem(settings, cohort)
    assert problem is not None and problem.startswith(f"run config {message}")


@pytest.mark.parametrize(
    ("settings", "cohort"),
    [
        (AggregationSettings(), 1),
        (AggregationSettings("trimmed-mean", trim_fraction=0.125), 8),
        (AggregationSettings("krum", byzantine_clients=2), 7),
        (AggregationSettings("bulyan", byzantine_clients=1), 7),
        (AggregationSettings("mean"), 1),
        (AggregationSettings("median"), 2),
    ],
)
def test_settings_that_fit_the_cohort_pass(settings: AggregationSettings, cohort: int) -> None:
    assert settings_problem(settings, cohort) is None
