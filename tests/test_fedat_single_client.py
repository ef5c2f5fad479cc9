"""The single-client FedAT study's pieces (experiments/fedat_single_client.py): the splits, the metadata selections
of Table 5.3 and Fig. 5.10, epoch snapshots of one run, and fresh random streams per chain of steps."""

from __future__ import annotations

import argparse
import functools

import numpy as np
import pytest
import torch

from experiments.fedat_single_client import (
    PARTS,
    SERVER_SETTINGS,
    STEP,
    Scenario,
    class_positions,
    fig5_10,
    fit,
    fresh_rng,
    markdown,
    parse_parts,
    scores,
    server_settings,
    share_positions,
    split_generic,
    step2_snapshots,
    table5_3,
    with_bn_refresh,
)
from methods.fedat.attention_transfer import train_server_step
from models import build_model
from models.batchnorm import settle_batchnorm

SMALL_STEP = {**STEP, "batch_size": 8}


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _scenario(seed: int = 0) -> Scenario:
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(60) % 10
    client = (torch.randn(60, 3, 8, 8, generator=g), labels)
    generic = (torch.randn(20, 3, 8, 8, generator=g), torch.arange(20) % 9)
    test = (torch.randn(30, 3, 8, 8, generator=g), torch.arange(30) % 10)
    return Scenario(
        build_model("wrn-16-1", 3, 10),
        build_model("wrn-10-1", 3, 10),
        generic,
        client,
        functools.partial(scores, x=test[0], y=test[1]),
        seed,
    )


def test_non_iid_split_keeps_class_9_from_the_server_only() -> None:
    labels = np.repeat(np.arange(10), 20)
    generic, client = split_generic(labels, "non-iid", 0.2, seed=0)
    assert set(labels[generic]) == set(range(9)) and len(generic) == 180
    assert (labels[client] == 9).sum() == 20 and len(client) == 20 + 9 * 4
    iid_generic, iid_client = split_generic(labels, "iid", 0.2, seed=0)
    assert len(iid_generic) == 40 and sorted(np.concatenate([iid_generic, iid_client]).tolist()) == list(range(200))
    smaller, same_client = split_generic(labels, "non-iid", 0.2, seed=0, generic_share=0.25)
    assert np.array_equal(same_client, client) and set(smaller) < set(generic)
    assert np.bincount(labels[smaller], minlength=10).tolist() == [5] * 9 + [0]  # a quarter of each of classes 0-8


def test_class_positions_pick_exactly_the_class_9_maps() -> None:
    labels = torch.tensor([9, 0, 9, 3, 9, 8, 1])
    assert class_positions(labels, 9).tolist() == [0, 2, 4]
    assert class_positions(labels, None).tolist() == list(range(7))
    assert class_positions(labels, 5).tolist() == []


@pytest.mark.parametrize(("n", "share"), [(1680, 1.0), (1680, 0.1), (1680, 0.01), (7, 0.5)])
def test_share_positions_pick_round_share_times_n_distinct_maps(n: int, share: float) -> None:
    rows = share_positions(n, share, seed=3)
    assert len(rows) == round(share * n) == len(set(rows.tolist()))
    assert rows.min() >= 0 and rows.max() < n and (np.diff(rows) > 0).all()
    assert np.array_equal(rows, share_positions(n, share, seed=3))  # the same maps for the same seed


def test_share_positions_depend_on_the_seed_and_refuse_empty_shares() -> None:
    assert not np.array_equal(share_positions(1000, 0.1, seed=0), share_positions(1000, 0.1, seed=1))
    for share in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="share"):
            share_positions(100, share, seed=0)
    with pytest.raises(ValueError, match="keeps none"):
        share_positions(40, 0.01, seed=0)


def test_epoch_snapshots_of_one_run_equal_separate_runs_from_the_start() -> None:
    """One run with copies after 1 and 3 epochs gives what separate 1- and 3-epoch runs from the same start and
    seed give (dropout and batch order drawn afresh from the seed, the optimiser continuing)."""
    torch.manual_seed(0)
    start = build_model("wrn-16-1", 3, 10)
    before = _state(start)
    g = torch.Generator().manual_seed(1)
    maps, labels = torch.randn(20, 16, 8, 8, generator=g), torch.randint(0, 10, (20,), generator=g)
    snaps = step2_snapshots(start, "low", maps, labels, (1, 3), SMALL_STEP, fresh_rng(5))
    assert sorted(snaps) == [1, 3] and _same(before, _state(start))
    for epochs, snap in snaps.items():
        separate = build_model("wrn-16-1", 3, 10)
        separate.load_state_dict(before)
        train_server_step(separate, 2, "low", maps, labels, epochs=epochs, generator=fresh_rng(5), **SMALL_STEP)
        assert _same(_state(snap), _state(separate))
    assert not _same(_state(snaps[1]), _state(snaps[3]))


def test_table5_3_scores_each_epoch_count_on_the_chosen_maps() -> None:
    s = _scenario()
    out = table5_3(s, s.global_model)
    assert list(out) == [
        "table5.3 (metadata at up): class 9 only (6 maps)",
        "table5.3 (metadata at up): all classes (60 maps)",
    ]
    assert list(out["table5.3 (metadata at up): class 9 only (6 maps)"]) == [
        "step 2, 1 epoch",
        "step 2, 2 epochs",
        "step 2, 3 epochs",
        "step 2, 4 epochs",
    ]
    assert list(out["table5.3 (metadata at up): all classes (60 maps)"])[-1] == "step 2, 40 epochs"


def test_fresh_chains_do_not_depend_on_what_ran_before() -> None:
    s = _scenario()
    alone = fig5_10(s, s.global_model)
    torch.randn(100)  # anything drawing from the global stream in between
    settings = server_settings(s, with_metadata=True)
    again = fig5_10(s, s.global_model)
    assert alone == again
    assert list(alone) == [
        "fig5.10 (metadata at low): 100% of D_1,meta (60 maps)",
        "fig5.10 (metadata at low): 10% of D_1,meta (6 maps)",
        "fig5.10 (metadata at low): 1% of D_1,meta (1 maps)",
    ]
    assert all(list(rows) == ["step 2", "step 3 with AT", "step 3 without AT"] for rows in alone.values())
    assert list(settings) == list(SERVER_SETTINGS)
    assert list(settings[next(iter(SERVER_SETTINGS))]) == [
        "step 1 (AT on D_g)",
        "metadata at low: step 2",
        "metadata at low: step 3 with AT",
        "metadata at low: step 3 without AT",
        "D_g only, same epochs",
    ]
    assert list(server_settings(s, with_metadata=False)[next(iter(SERVER_SETTINGS))]) == [
        "step 1 (AT on D_g)",
        "D_g only, same epochs",
    ]


def test_server_settings_change_one_thing_each_from_the_thesis_lr() -> None:
    default, *others = SERVER_SETTINGS.values()
    assert default is STEP and STEP["lr"] == 0.1
    changed = [{k for k in STEP if other[k] != STEP[k]} for other in others]
    assert changed == [{"lr"}, {"momentum"}] and STEP["momentum"] == 0.0  # the thesis names plain SGD
    assert all("NOT" in name for name in list(SERVER_SETTINGS)[1:])


def test_parts_parse_and_the_table_skips_bookkeeping() -> None:
    assert parse_parts("table5_3, fig5_10") == ["table5_3", "fig5_10"]
    assert parse_parts(",".join(PARTS)) == list(PARTS)
    with pytest.raises(argparse.ArgumentTypeError, match="table5_9"):
        parse_parts("table5_3,table5_9")
    row = {"all": 50.0, "class9": 12.5}
    results = {"scenarios": {"non-iid": {"sizes": {"generic": 1}, "seconds": {"x": 1.0}, "table5.2": {"step 1": row}}}}
    assert markdown(results).splitlines()[2:] == ["| non-iid | table5.2: step 1 | 50.00 | 12.50 |"]


def test_bn_refresh_scores_a_copy_with_fresh_statistics_and_leaves_the_model() -> None:
    s = _scenario()
    model = s.global_model
    for m in model.modules():  # stale statistics, as after training in train mode
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.fill_(3.0)
    before = _state(model)
    both = with_bn_refresh(s.score, s.generic[0])(model)
    assert _same(before, _state(model))
    assert {k: both[k] for k in ("all", "class9")} == s.score(model)
    assert set(both) == {"all", "class9", "all_bn", "class9_bn"}
    rows = {"non-iid": {"bn_refresh: x": {"step 1": {"all": 1.0, "class9": 2.0, "all_bn": 3.0, "class9_bn": 4.0}}}}
    assert markdown({"scenarios": rows}).splitlines()[2:] == [
        "| non-iid | bn_refresh: x: step 1 | 1.00 | 2.00 |",
        "| non-iid | bn_refresh: x: step 1, then BatchNorm statistics re-estimated on D_g | 3.00 | 4.00 |",
    ]


def test_the_d_g_only_control_ends_with_settled_batchnorm_like_step_1() -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(24, 3, 8, 8, generator=g), torch.randint(0, 10, (24,), generator=g)
    model = fit(build_model("wrn-10-1", 3, 10), x, y, epochs=1, seed=0, step=SMALL_STEP)
    settled = _state(model)
    settle_batchnorm(model, x, batch_size=SMALL_STEP["batch_size"])
    assert _same(settled, _state(model))  # its statistics already are those of x: scoring it is like scoring step 1
