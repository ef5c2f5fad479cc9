"""A collapse is visible: chance level after having been above it, or far below the start."""

from __future__ import annotations

from server_app.collapse import chance_level, round_warning, run_warnings


def test_chance_level_is_one_and_a_half_times_uniform():
    assert chance_level(10) == 0.15 and chance_level(4) == 0.375


def test_a_model_that_falls_to_chance_is_flagged_one_that_never_left_it_is_not():
    assert "at chance level" in round_warning(0.10, [0.80], 10)
    assert "at chance level" in round_warning(0.10, [None, 0.40], 10)  # an unscored start, an earlier good round
    assert round_warning(0.10, [0.10], 10) is None  # from scratch: not yet learning is no collapse
    assert round_warning(0.12, [0.09, 0.11], 10) is None


def test_far_below_the_start_is_flagged_with_the_fall():
    assert round_warning(0.60, [0.80, 0.70], 10) == "20.0 points below the start (80.0%)"
    assert round_warning(0.66, [0.80], 10) is None  # 14 points: within the margin
    assert round_warning(0.50, [None, 0.80], 10) is None  # no scored start to compare with


def rounds(*pairs):
    return [{"round": r, "accuracy": a, **({"warning": w} if w else {})} for r, a, w in pairs]


def test_run_warnings_name_the_final_model_and_the_rounds_at_chance():
    at_chance = "at chance level (≤ 15% for 10 classes) after being above it"
    assert run_warnings(rounds((1, 0.1, at_chance), (2, 0.1, at_chance))) == [
        f"the final model (round 2) is {at_chance}",
        "the global model was at chance level in round 1",
    ]
    assert run_warnings(rounds((1, 0.1, at_chance), (2, 0.6, None), (3, 0.1, at_chance), (4, 0.62, None))) == [
        "the global model was at chance level in rounds 1, 3"
    ]
    assert run_warnings(rounds((1, 0.6, "20.0 points below the start (80.0%)"))) == [
        "the final model (round 1) is 20.0 points below the start (80.0%)"
    ]
    assert run_warnings(rounds((1, 0.6, None), (2, 0.7, None))) == []
    assert run_warnings([]) == []
