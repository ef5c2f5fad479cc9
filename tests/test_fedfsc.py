"""FedFSC kernels: eligibility, shot draws, the classifier-only update, averaging, composition, roles, bytes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from methods.common.state_averaging import average_states
from methods.fedfsc.fewshot import (
    FEWSHOT_KEY,
    NON_STRAGGLER_KEY,
    FedFscSettings,
    FewShotOptimiser,
    Role,
    assign_roles,
    average_fewshot_classifiers,
    check_role_fractions,
    compose_global_state,
    draw_shots,
    draw_stragglers,
    eligible_classes,
    fscprox_penalty,
    train_fewshot_classifier,
    uplink_bytes,
)
from methods.fedfsc.method import BASELINE_PLUS_PLAN, FEDFSC_PLAN, FEDFSC_PLUS_BASELINE_PLUS_PLAN, FEDFSC_PLUS_PLAN
from models import build_model
from models.outputs import penultimate_features

LABELS = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 0, 2, 1, 0])  # class counts 5, 2, 5, 0


def test_eligible_classes_have_at_least_the_shot_count() -> None:
    eligible, used = eligible_classes(LABELS, shots=3, num_classes=4)
    assert eligible.tolist() == [True, False, True, False] and used == 3


def test_shot_count_drops_until_some_class_qualifies() -> None:
    eligible, used = eligible_classes(LABELS, shots=10, num_classes=4)
    assert used == 5 and eligible.tolist() == [True, False, True, False]
    eligible, used = eligible_classes(torch.tensor([3, 1]), shots=10, num_classes=4)
    assert used == 1 and eligible.tolist() == [False, True, False, True]


def test_eligibility_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="fedfsc.fewshot-shots"):
        eligible_classes(LABELS, shots=0, num_classes=4)
    with pytest.raises(ValueError, match="num_classes"):
        eligible_classes(LABELS, shots=1, num_classes=2)


def test_draw_shots_takes_n_distinct_samples_of_each_eligible_class() -> None:
    eligible, used = eligible_classes(LABELS, shots=3, num_classes=4)
    picked = draw_shots(LABELS, eligible, used, torch.Generator().manual_seed(0))
    assert len(set(picked.tolist())) == len(picked) == 6
    assert LABELS[picked].tolist() == [0, 0, 0, 2, 2, 2]


def test_draws_depend_on_the_seed_and_cover_every_sample() -> None:
    eligible = torch.tensor([True, False, True, False])
    draws = {
        tuple(sorted(draw_shots(LABELS, eligible, 2, torch.Generator().manual_seed(s)).tolist())) for s in range(40)
    }
    assert len(draws) > 10
    assert {i for d in draws for i in d} == {i for i, y in enumerate(LABELS.tolist()) if y in (0, 2)}
    same = [draw_shots(LABELS, eligible, 2, torch.Generator().manual_seed(7)).tolist() for _ in range(2)]
    assert same[0] == same[1]


def _features(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(40, 6, generator=g)
    labels = torch.arange(40) % 4
    return features, labels, torch.randn(4, 6, generator=g), torch.randn(4, generator=g)


def test_fewshot_update_copies_the_base_classifier_and_trains_only_on_the_shots() -> None:
    features, labels, weight, bias = _features()
    weight_before, bias_before = weight.clone(), bias.clone()
    opt = FewShotOptimiser(epochs=1, batch_size=100, momentum=0.0, weight_decay=0.0, lr=0.5)
    result = train_fewshot_classifier(
        features, labels, weight, bias, shots=3, optimiser=opt, generator=torch.Generator().manual_seed(1)
    )
    w, b = result.weight, result.bias
    assert (result.shots, result.classes) == (3, 4)
    assert torch.equal(weight, weight_before) and torch.equal(bias, bias_before)  # inputs untouched
    # One full-batch SGD step from the base classifier on the 12 drawn shots, by hand.
    support = draw_shots(labels, torch.ones(4, dtype=torch.bool), 3, torch.Generator().manual_seed(1))
    w0, b0 = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    loss = F.cross_entropy(F.linear(features[support], w0, b0), labels[support])
    loss.backward()
    torch.testing.assert_close(result.loss, loss.detach())  # the mean loss of the one step
    torch.testing.assert_close(w, weight - 0.5 * w0.grad)
    torch.testing.assert_close(b, bias - 0.5 * b0.grad)


def test_resampling_each_epoch_differs_from_one_draw_per_round() -> None:
    features, labels, weight, bias = _features()
    opt = FewShotOptimiser(epochs=3)
    per_epoch = train_fewshot_classifier(
        features, labels, weight, bias, shots=2, optimiser=opt, generator=torch.Generator().manual_seed(0)
    )
    per_round = train_fewshot_classifier(
        features,
        labels,
        weight,
        bias,
        shots=2,
        optimiser=opt,
        generator=torch.Generator().manual_seed(0),
        resample_each_epoch=False,
    )
    assert not torch.equal(per_epoch.weight, per_round.weight)
    again = train_fewshot_classifier(
        features, labels, weight, bias, shots=2, optimiser=opt, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(per_epoch.weight, again.weight) and torch.equal(per_epoch.bias, again.bias)


def test_fewshot_update_lowers_the_loss_on_separable_features() -> None:
    labels = torch.arange(40) % 4
    features = F.one_hot(labels, 4).float() * 3 + 0.1 * torch.randn(40, 4, generator=torch.Generator().manual_seed(0))
    weight, bias = torch.zeros(4, 4), torch.zeros(4)
    result = train_fewshot_classifier(features, labels, weight, bias, generator=torch.Generator().manual_seed(0))
    w, b = result.weight, result.bias
    assert F.cross_entropy(F.linear(features, w, b), labels) < 0.5 * F.cross_entropy(
        F.linear(features, weight, bias), labels
    )


def test_the_fewshot_sgd_is_the_codes_dampened_momentum_by_hand() -> None:
    """Defaults (setting and kernel agree): lr 0.01, momentum 0.9, dampening 0.9, weight decay 1e-3. PyTorch's
    momentum buffer starts at the first gradient, then b ← 0.9·b + 0.1·g: steps about 10x smaller than with 0."""
    optimiser = FewShotOptimiser()
    assert FedFscSettings().optimiser() == optimiser and optimiser.dampening == 0.9
    generator = torch.Generator().manual_seed(3)
    labels = torch.arange(8) % 2
    features = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    weight, bias = torch.randn(2, 3, generator=generator, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    full_batch = FewShotOptimiser(batch_size=8, epochs=4)  # all 4 shots of both classes in one batch per epoch
    result = train_fewshot_classifier(
        features, labels, weight, bias, shots=4, optimiser=full_batch, generator=torch.Generator().manual_seed(0)
    )
    w, b = weight.clone(), bias.clone()
    buffers: list[torch.Tensor] = []
    for step in range(4):
        w_, b_ = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
        F.cross_entropy(F.linear(features, w_, b_), labels).backward()
        grads = [w_.grad + 1e-3 * w, b_.grad + 1e-3 * b]
        buffers = grads if step == 0 else [0.9 * m + 0.1 * g for m, g in zip(buffers, grads, strict=True)]
        w, b = w - 0.01 * buffers[0], b - 0.01 * buffers[1]
    torch.testing.assert_close(result.weight, w)
    torch.testing.assert_close(result.bias, b)


def test_classifiers_are_averaged_uniformly_not_by_sample_count() -> None:
    a = {"fc.weight": torch.tensor([[0.0, 2.0]]), "fc.bias": torch.tensor([1.0])}
    b = {"fc.weight": torch.tensor([[4.0, 6.0]]), "fc.bias": torch.tensor([5.0])}
    mean = average_fewshot_classifiers([a, b])
    assert mean["fc.weight"].tolist() == [[2.0, 4.0]] and mean["fc.bias"].tolist() == [3.0]
    weighted = average_states([a, b], weights=[30, 10])  # what FedAvg's |D_k| weights would give
    assert weighted["fc.weight"].tolist() == [[1.0, 3.0]] and weighted["fc.bias"].tolist() == [2.0]


def test_composed_global_model_takes_classifier_from_fewshot_and_the_rest_from_round_t_base() -> None:
    torch.manual_seed(0)
    base_t = build_model("wrn-10-1", 3, 10).state_dict()
    base_next = build_model("wrn-10-1", 3, 10).state_dict()  # the newly aggregated base: must not be used
    keys = build_model("wrn-10-1", 3, 10).classifier_keys()
    assert keys == ["stages.head.fc.weight", "stages.head.fc.bias"]
    fewshot = {k: torch.full_like(base_t[k], 7.0) for k in keys}
    composed = compose_global_state(base_t, fewshot)
    for key, value in composed.items():
        expected = fewshot[key] if key in keys else base_t[key]
        assert torch.equal(value, expected), key
    assert not torch.equal(composed["stages.stem.weight"], base_next["stages.stem.weight"])
    composed["stages.stem.weight"].add_(1)
    assert not torch.equal(composed["stages.stem.weight"], base_t["stages.stem.weight"])  # a copy


def test_compose_refuses_mismatched_classifiers() -> None:
    base = {"fc.weight": torch.zeros(2, 3), "fc.bias": torch.zeros(2)}
    with pytest.raises(ValueError, match="shape"):
        compose_global_state(base, {"fc.weight": torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="not in the base"):
        compose_global_state(base, {"head.weight": torch.zeros(2, 3)})


def test_fewshot_features_come_from_the_frozen_extractor_in_eval_mode() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 10).train()
    x = torch.randn(5, 3, 8, 8)
    features = penultimate_features(model, x, batch_size=2)
    assert model.training and features.shape == (5, 64)
    model.eval()
    fc = model.stages["head"].fc
    torch.testing.assert_close(F.linear(features, fc.weight, fc.bias), model(x))


def test_fscprox_is_mu_times_the_squared_distance() -> None:
    w, b = torch.tensor([[1.0, 2.0]], requires_grad=True), torch.tensor([0.5], requires_grad=True)
    penalty = fscprox_penalty([w, b], [torch.tensor([[0.0, 0.0]]), torch.tensor([-0.5])], mu=0.1)
    assert penalty.item() == pytest.approx(0.1 * (1 + 4 + 1))
    penalty.backward()
    torch.testing.assert_close(w.grad, torch.tensor([[0.2, 0.4]]))  # 2μ(θ − θ_fs), no ½ as in the text


def test_stragglers_are_drawn_from_the_rest_of_the_pool_by_the_fraction_and_change_each_round() -> None:
    pool = list(range(100))
    non_stragglers = list(range(0, 100, 10))
    stragglers = draw_stragglers(pool, non_stragglers, 0.1, seed=0, server_round=2)
    assert len(stragglers) == 10 and not set(stragglers) & set(non_stragglers)
    assert draw_stragglers(pool, non_stragglers, 0.1, seed=0, server_round=2) == stragglers
    assert draw_stragglers(pool, non_stragglers, 0.1, seed=0, server_round=3) != stragglers
    assert draw_stragglers(pool, non_stragglers, 0.1, seed=1, server_round=2) != stragglers
    assert sorted(draw_stragglers([4, 9, 11], [9], 0.9, seed=0, server_round=5)) == [4, 11]  # at most the rest


def test_roles_of_each_plan() -> None:
    full, few, both = Role(10, False), Role(0, True), Role(10, True)
    non_stragglers, stragglers = [3, 1], [7, 5]
    assert assign_roles(FEDFSC_PLAN, non_stragglers, stragglers, 2, 10, 1) == {3: both, 1: both}
    assert assign_roles(FEDFSC_PLUS_PLAN, non_stragglers, stragglers, 2, 10, 1) == {3: full, 1: full, 7: few, 5: few}
    assert assign_roles(FEDFSC_PLUS_BASELINE_PLUS_PLAN, non_stragglers, stragglers, 2, 10, 1) == {
        3: full,
        1: full,
        7: Role(1, True),
        5: Role(1, True),
    }
    reduced = Role(1, False)
    assert assign_roles(BASELINE_PLUS_PLAN, non_stragglers, stragglers, 2, 10, 1) == {
        3: full,
        1: full,
        7: reduced,
        5: reduced,
    }
    assert list(assign_roles(FEDFSC_PLUS_PLAN, non_stragglers, stragglers, 2, 10, 1)) == [3, 1, 7, 5]


def test_first_round_has_no_fewshot_updates() -> None:
    full = Role(10, False)
    assert assign_roles(FEDFSC_PLAN, [3, 1], [7], 1, 10, 1) == {3: full, 1: full}
    assert assign_roles(FEDFSC_PLUS_PLAN, [3, 1], [7], 1, 10, 1) == {3: full, 1: full}  # the straggler is idle
    assert assign_roles(FEDFSC_PLUS_BASELINE_PLUS_PLAN, [3], [7], 1, 10, 1) == {3: full, 7: Role(1, False)}


@pytest.mark.parametrize(
    ("f_n", "f_fs", "match"),
    [
        (0.5, 0.5, f"'{NON_STRAGGLER_KEY}' \\(f_n\\) \\+ '{FEWSHOT_KEY}' \\(f_fs\\) must be < 1"),
        (0.0, 0.1, NON_STRAGGLER_KEY),
        (0.2, 0.0, FEWSHOT_KEY),
    ],
)
def test_role_fractions_are_validated_naming_the_keys(f_n: float, f_fs: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_role_fractions(f_n, f_fs)


def test_uplink_bytes_count_full_model_plus_one_linear_layer() -> None:
    model = build_model("wrn-16-1", 3, 10)
    state = model.state_dict()
    keys = model.classifier_keys()
    full = sum(v.numel() * v.element_size() for v in state.values())
    linear = (64 * 10 + 10) * 4
    assert uplink_bytes(state, keys, full=True, fewshot=False) == full
    assert uplink_bytes(state, keys, full=False, fewshot=True) == linear
    assert uplink_bytes(state, keys, full=True, fewshot=True) == full + linear


def test_fscprox_refuses_a_negative_mu() -> None:
    with pytest.raises(ValueError, match="fscprox-mu must be >= 0"):
        fscprox_penalty([torch.zeros(1)], [torch.zeros(1)], mu=-1.0)
