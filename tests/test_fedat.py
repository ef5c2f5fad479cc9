"""FedAT kernels: attention maps and AT loss by hand, the three server steps' trainable parts, pairing."""

from __future__ import annotations

import math

import pytest
import torch

from methods.fedat.attention_transfer import (
    AT_LEVELS_KEY,
    LEVEL_KEY,
    aggregate_global_copies,
    at_step_loss,
    attention_map,
    attention_transfer_loss,
    check_fedat_settings,
    check_pairing,
    global_copy,
    inherit_from_global,
    levels_for_step,
    normalised_attention,
    not_inheritable,
    prepare_step,
    train_server_step,
)
from models import build_model
from models.batchnorm import settle_batchnorm

# Two channels of a 2 × 2 map: A = f₁² + f₂² = [[1+4, 0+1], [4+0, 9+1]] = [[5, 1], [4, 10]].
MAP = torch.tensor([[[[1.0, 0.0], [-2.0, 3.0]], [[2.0, -1.0], [0.0, 1.0]]]], dtype=torch.float64)


def test_attention_map_sums_squared_channels() -> None:
    assert attention_map(MAP).tolist() == [[5.0, 1.0, 4.0, 10.0]]
    assert attention_map(MAP, p=1).tolist() == [[3.0, 1.0, 2.0, 4.0]]
    norm = math.sqrt(25 + 1 + 16 + 100)
    torch.testing.assert_close(
        normalised_attention(MAP), torch.tensor([[5 / norm, 1 / norm, 4 / norm, 10 / norm]], dtype=torch.float64)
    )


def test_attention_map_refuses_non_spatial_features() -> None:
    with pytest.raises(ValueError, match="N × C × H × W"):
        attention_map(torch.zeros(2, 64))


def _pair() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[float], list[float]]:
    # Level "low": student A = [1, 0], teacher A = [0, 1] (normalised already). Level "mid": equal maps.
    student = {"low": torch.tensor([[[[1.0, 0.0]]]]), "mid": torch.tensor([[[[3.0, 4.0]]]])}
    teacher = {"low": torch.tensor([[[[0.0, 1.0]]]]), "mid": torch.tensor([[[[3.0, 4.0]]]])}
    return student, teacher, [1.0, -1.0], [0.0, 0.0]


def test_reference_at_loss_is_half_the_mean_squared_difference() -> None:
    student, teacher, low_diff, mid_diff = _pair()
    expected = 0.5 * sum(d * d for d in low_diff) / 2 + 0.5 * sum(d * d for d in mid_diff) / 2
    loss = attention_transfer_loss(student, teacher, ["low", "mid"], form="reference")
    assert loss.item() == pytest.approx(expected) == pytest.approx(0.5)


def test_thesis_at_loss_is_the_l2_norm_of_the_difference() -> None:
    student, teacher, _, _ = _pair()
    loss = attention_transfer_loss(student, teacher, ["low", "mid"], form="thesis")
    assert loss.item() == pytest.approx(math.sqrt(2))


def test_at_loss_averages_samples_and_only_reads_the_given_levels() -> None:
    g = torch.Generator().manual_seed(0)
    student = {"low": torch.randn(3, 4, 2, 2, generator=g), "up": torch.randn(3, 4, 1, 1, generator=g)}
    teacher = {"low": torch.randn(3, 8, 2, 2, generator=g), "up": torch.full((3, 2, 1, 1), float("nan"))}
    per_sample = [
        ((normalised_attention(student["low"][i : i + 1]) - normalised_attention(teacher["low"][i : i + 1])) ** 2).sum()
        for i in range(3)
    ]
    loss = attention_transfer_loss(student, teacher, ["low"])
    assert loss.item() == pytest.approx(0.5 * sum(p.item() for p in per_sample) / (3 * 4))


def test_at_step_loss_is_cross_entropy_plus_beta_times_at() -> None:
    torch.manual_seed(0)
    student, teacher = build_model("wrn-16-1", 3, 10).eval(), build_model("wrn-10-1", 3, 10).eval()
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 7])
    ce = torch.nn.functional.cross_entropy(student(x), y)
    at = sum(
        attention_transfer_loss({lv: student.forward_to(x, lv)}, {lv: teacher.forward_to(x, lv)}, [lv])
        for lv in ("low", "mid", "up")
    )
    loss = at_step_loss(student, teacher, x, y, ("low", "mid", "up"), beta=1000.0)
    assert loss.item() == pytest.approx((ce + 1000.0 * at).item(), rel=1e-5)
    assert at_step_loss(student, teacher, x, y, ()).item() == pytest.approx(ce.item(), rel=1e-6)


def test_levels_per_step() -> None:
    assert levels_for_step(1, "mid") == ("low", "mid", "up")
    assert levels_for_step(2, "mid") == ()
    assert levels_for_step(3, "low") == ("low",)
    assert levels_for_step(3, "mid") == ("low", "mid")
    assert levels_for_step(3, "up") == ("low", "mid", "up")
    with pytest.raises(ValueError, match=LEVEL_KEY):
        levels_for_step(3, "head")


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _changed(before: dict[str, torch.Tensor], model: torch.nn.Module) -> set[str]:
    return {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)


@pytest.mark.parametrize("theta_batchnorm", ["train", "frozen"])
def test_step_three_trains_phi_and_leaves_theta_weights_bitwise_frozen(theta_batchnorm: str) -> None:
    torch.manual_seed(0)
    global_model, client = build_model("wrn-16-1", 3, 10), build_model("wrn-10-1", 3, 10)
    copy = global_copy(global_model)
    before = _state(copy)
    x, y = _data()
    train_server_step(
        copy,
        3,
        "mid",
        x,
        y,
        teacher=client,
        epochs=1,
        batch_size=4,
        lr=0.1,
        momentum=0.9,
        weight_decay=1e-3,
        theta_batchnorm=theta_batchnorm,  # type: ignore[arg-type]
        generator=torch.Generator().manual_seed(0),
    )
    changed = _changed(before, copy)
    theta = set(copy.upper_state_keys("mid"))
    weights = {f"stages.{name}" for name, _ in copy.stages.named_parameters()}
    theta_weights, theta_statistics = theta & weights, {k for k in theta - weights if "running" in k}
    assert theta_weights and not changed & theta_weights  # the weights of group "up" and the head untouched
    assert any(k.startswith("stages.low.") for k in changed) and any(k.startswith("stages.mid.") for k in changed)
    if theta_batchnorm == "frozen":
        assert not changed & theta  # BatchNorm statistics too: θ ran in eval mode
    else:  # θ's statistics are those of the maps φ now gives it on the step's images, dropout off
        assert theta_statistics and theta_statistics <= changed
        expected = global_copy(copy)
        settle_batchnorm(expected, x, batch_size=4)
        assert all(torch.equal(expected.state_dict()[k], copy.state_dict()[k]) for k in theta_statistics)
    assert _changed(_state(global_model), global_model) == set()  # the copy is independent: w_g^t unchanged
    assert all(p.requires_grad for p in copy.parameters()) and copy.training  # reset for the next step


def test_step_two_trains_only_theta_on_metadata() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-16-1", 3, 10)
    before = _state(model)
    g = torch.Generator().manual_seed(1)
    metadata, labels = torch.randn(8, 32, 4, 4, generator=g), torch.randint(0, 10, (8,), generator=g)
    train_server_step(
        model, 2, "mid", metadata, labels, epochs=1, batch_size=4, lr=0.1, generator=torch.Generator().manual_seed(0)
    )
    changed = _changed(before, model)
    assert changed and changed <= set(model.upper_state_keys("mid"))


def test_step_one_trains_everything() -> None:
    torch.manual_seed(0)
    model, client = build_model("wrn-16-1", 3, 10), build_model("wrn-10-1", 3, 10)
    before = _state(model)
    x, y = _data()
    train_server_step(
        model,
        1,
        "mid",
        x,
        y,
        teacher=client,
        epochs=1,
        batch_size=8,
        lr=0.1,
        generator=torch.Generator().manual_seed(0),
    )
    changed = _changed(before, model)
    assert {k.split(".")[1] for k in changed} == {"stem", "low", "mid", "up", "head"}


def test_prepare_step_hands_out_only_the_allowed_parameters() -> None:
    model = build_model("wrn-10-1", 3, 10)
    assert len(prepare_step(model, 1, "low")) == len(list(model.parameters()))
    theta = {id(p) for p in model.upper_parameters("low")}
    assert {id(p) for p in prepare_step(model, 2, "low")} == theta
    phi = {id(p) for s in model.lower_stages("low") for p in s.parameters()}
    assert {id(p) for p in prepare_step(model, 3, "low")} == phi
    assert model.stages["head"].training and model.stages["low"].training  # θ's BatchNorm on batch statistics
    assert {id(p) for p in prepare_step(model, 3, "low", "frozen")} == phi
    assert not model.stages["head"].training and model.stages["low"].training
    with pytest.raises(ValueError, match="1, 2 and 3"):
        prepare_step(model, 4, "low")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fedat.step3-theta-batchnorm"):
        prepare_step(model, 3, "low", "eval")  # type: ignore[arg-type]


def test_steps_one_and_three_need_a_teacher() -> None:
    x, y = _data()
    with pytest.raises(ValueError, match="teacher"):
        train_server_step(
            build_model("wrn-10-1", 3, 10), 3, "low", x, y, epochs=1, batch_size=4, lr=0.1, generator=torch.Generator()
        )


def test_global_copies_are_averaged_by_client_data_size() -> None:
    a = {"w": torch.tensor([0.0, 4.0]), "n": torch.tensor(2)}
    b = {"w": torch.tensor([4.0, 8.0]), "n": torch.tensor(6)}
    mean = aggregate_global_copies([a, b], sizes=[300, 100])
    assert mean["w"].tolist() == [1.0, 5.0] and mean["n"].item() == 3 and mean["n"].dtype == torch.int64


def test_wrn_depths_pair_at_every_level() -> None:
    shapes = check_pairing(build_model("wrn-10-1", 3, 10), build_model("wrn-40-1", 3, 10), (3, 32, 32), "low")
    assert shapes == {"low": (16, 32, 32), "mid": (32, 16, 16), "up": (64, 8, 8)}


def test_wider_client_pairs_for_attention_but_not_for_metadata() -> None:
    # WRN-10-2 has twice the channels: attention maps (H × W) pair at every level, metadata maps do not.
    client, server = build_model("wrn-10-2", 3, 10), build_model("wrn-16-1", 3, 10)
    for level in ("low", "mid", "up"):
        with pytest.raises(ValueError, match=f"{LEVEL_KEY}: client feature maps at '{level}' have shape"):
            check_pairing(client, server, (3, 16, 16), level)


def test_models_that_cannot_pair_are_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=f"{AT_LEVELS_KEY}: attention maps at 'low' cannot pair"):
        check_pairing(
            build_model("lenet5", 3, 10), build_model("wrn-16-1", 3, 10), (3, 32, 32), "low", at_levels=("low", "up")
        )
    with pytest.raises(ValueError, match=f"{AT_LEVELS_KEY}: the client model has no level 'top'"):
        check_pairing(
            build_model("wrn-10-1", 3, 10), build_model("wrn-16-1", 3, 10), (3, 8, 8), "low", at_levels=("top",)
        )


@pytest.mark.parametrize(
    ("level", "beta", "form", "at_levels", "match"),
    [
        ("head", 1000.0, "reference", ("low",), "metadata-level must be one of low, mid, up"),
        ("low", -1.0, "reference", ("low",), "at-beta must be >= 0"),
        ("low", 1000.0, "squared", ("low",), "at-form must be one of reference, thesis"),
        ("low", 1000.0, "thesis", ("low", "top"), "at-levels must be a non-empty subset"),
        ("low", 1000.0, "thesis", (), "at-levels must be a non-empty subset"),
    ],
)
def test_settings_are_validated_naming_the_key(
    level: str, beta: float, form: str, at_levels: tuple[str, ...], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        check_fedat_settings(level, beta, form, at_levels)
    check_fedat_settings("mid", 1000.0, "reference")


def test_unknown_at_form_is_refused_by_the_loss() -> None:
    maps = {"low": torch.ones(1, 1, 2, 2)}
    with pytest.raises(ValueError, match="fedat.at-form"):
        attention_transfer_loss(maps, maps, ["low"], form="l1")  # type: ignore[arg-type]


def test_a_shallower_client_inherits_the_global_model_with_blocks_removed() -> None:
    torch.manual_seed(0)
    server, client = build_model("wrn-16-1", 1, 10), build_model("wrn-10-1", 1, 10)
    fresh = {k: v.clone() for k, v in client.state_dict().items()}
    state = inherit_from_global(client.state_dict(), server.state_dict())
    assert not_inheritable(fresh, server.state_dict()) == []
    # Every entry is the global model's: the stem, the first block of each group, the head, BatchNorm statistics.
    assert all(torch.equal(state[k], server.state_dict()[k]) for k in state)
    assert any(not torch.equal(state[k], fresh[k]) for k in state)
    # A copy, not a view: training the client later cannot move the global model.
    state["stages.stem.weight"].add_(1.0)
    assert not torch.equal(state["stages.stem.weight"], server.state_dict()["stages.stem.weight"])


def test_a_client_of_the_global_architecture_starts_as_the_global_model() -> None:
    torch.manual_seed(0)
    server, client = build_model("lenet5", 1, 10), build_model("lenet5", 1, 10)
    client.load_state_dict(inherit_from_global(client.state_dict(), server.state_dict()))
    x = torch.randn(4, 1, 32, 32)
    assert torch.equal(client.eval()(x), server.eval()(x))


def test_entries_the_global_model_lacks_stay_as_given_and_are_named() -> None:
    torch.manual_seed(0)
    server, client = build_model("wrn-10-1", 1, 10), build_model("wrn-16-1", 1, 10)
    fresh = {k: v.clone() for k, v in client.state_dict().items()}
    state = inherit_from_global(client.state_dict(), server.state_dict())
    missing = not_inheritable(fresh, server.state_dict())
    assert missing and all(".1." in k for k in missing)  # the second block of each group
    assert all(torch.equal(state[k], fresh[k]) for k in missing)
    assert all(torch.equal(state[k], server.state_dict()[k]) for k in state if k not in missing)
    wider = build_model("wrn-10-2", 1, 10).state_dict()
    assert "stages.low.0.conv1.weight" in not_inheritable(wider, server.state_dict())  # same key, other shape
