"""FedFSC, FedFSC+ and the baseline+ variants as methods: settings checked together, the strategy's roles and
aggregation (against a fake grid), the client's pieces, and every preset end to end in one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from client_app.objective import CrossEntropy, LocalTraining
from methods.fedfsc.client_step import read_role
from methods.fedfsc.fewshot import (
    FedFscSettings,
    Role,
    fscprox_penalty,
    straggler_population_problem,
    uplink_bytes,
    with_classifier_prox,
)
from methods.fedfsc.method import FEDFSC_PLAN, FEDFSC_PLUS_PLAN
from methods.fedfsc.records import (
    FEWSHOT,
    FEWSHOT_ANCHOR,
    FEWSHOT_CLASSES,
    FEWSHOT_CLASSIFIER,
    FEWSHOT_EXAMPLES,
    FEWSHOT_LOSS,
    FEWSHOT_METRICS,
    FEWSHOT_SECONDS,
    FEWSHOT_SHOTS_USED,
    FULL_EPOCHS,
)
from methods.fedfsc.strategy import FewShotClassifierFedAvg, straggler_fields
from methods.registry import METHODS, for_run, parse_config
from models import build_model
from protocol.messages import (
    ARRAYS,
    CONFIG,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
)
from run_config import ConfigError
from server_app.run_errors import RunSetupError
from strategies.client_population import ClientPopulation
from strategies.label_counts import LabelCountRegistry
from strategies.robust_aggregation import AggregationSettings
from tests.conftest import make_config
from tests.fake_grid import FakeGrid, client_responders, train_metrics, train_reply
from tests.in_process import ServerKilled, run_in_process, small_run_config
from tests.test_reliability import rounds_of, without_timings

# ---------------------------------------------------------------- settings checked together, at start


@pytest.mark.parametrize(
    ("method", "values", "keys"),
    [
        (
            "fedfsc-plus",
            {"fraction-train": 0.5, "fedfsc.fewshot-fraction": 0.5},
            ["'fraction-train'", "'fedfsc.fewshot-fraction'"],
        ),
        ("fedavg-plus", {"fraction-train": 0.95, "fedfsc.fewshot-fraction": 0.1}, ["'fraction-train'", "must be < 1"]),
        (
            "fedfsc-plus",
            {"fraction-train": 0.1, "fedfsc.fewshot-fraction": 0.0},
            ["'fedfsc.fewshot-fraction'", "(0, 1)"],
        ),
        (
            "fedavg-plus",
            {"fraction-train": 0.1, "fedfsc.straggler-epochs": 5},
            ["'fedfsc.straggler-epochs' = 5", "'local-epochs'"],
        ),
        ("fedfsc", {"fedfsc.fscprox": "theta"}, ["'fedfsc.fscprox'"]),
        ("fedfsc", {"fedfsc.fewshot-shots": 0}, ["'fedfsc.fewshot-shots'"]),
    ],
)
def test_bad_settings_are_refused_naming_the_keys(defaults: dict, method: str, values: dict, keys: list[str]) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({**defaults, "method": method, **values})
    assert all(key in str(refused.value) for key in keys), str(refused.value)


def test_fedfsc_without_stragglers_needs_no_fraction_below_one(defaults: dict) -> None:
    config = parse_config({**defaults, "method": "fedfsc", "objective": "contrastive"})
    assert (config.freeze, config.data_selection, config.objective, config.fraction_train) == (
        "none",
        "all",
        "contrastive",
        1.0,
    )
    parse_config(
        {**defaults, "method": "fedfsc-plus", "fraction-train": 0.1, "fedfsc.straggler-epochs": 9}
    )  # E_r unused


FAMILY = ["fedfsc", "fedfsc-plus", "fedfsc-plus-baseline-plus", "fedavg-plus", "fedprox-plus", "moon-plus"]


@pytest.mark.parametrize("method", FAMILY)
def test_every_preset_parses_with_its_name_alone_and_fits_the_default_ten_clients(defaults: dict, method: str) -> None:
    """``method = <name>`` and nothing else: the methods with stragglers preset the thesis's f_n = 0.1 (§4.5.2;
    ``fraction-train = "auto"``), which with f_fs = 0.1 gives 1 non-straggler and 1 straggler of 10 clients."""
    config = parse_config({**defaults, "method": method})
    assert config.fraction_train == (1.0 if method == "fedfsc" else 0.1)
    assert config.settings(FedFscSettings).fewshot_fraction == 0.1
    check_run = METHODS[method].check_run
    assert (check_run is None) == (method == "fedfsc")
    if check_run is not None:
        check_run(config, 10)
    assert parse_config({**defaults, "method": method, "fraction-train": 0.3}).fraction_train == 0.3  # wins


@pytest.mark.parametrize(
    ("clients", "f_n", "f_fs", "problem"),
    [
        (10, 0.1, 0.1, None),
        (4, 0.5, 0.25, None),
        (4, 0.5, 0.1, "'fedfsc.fewshot-fraction' = 0.1 gives round(0.1 × 4) = 0 stragglers of 4 clients"),
        (
            2,
            0.1,
            0.85,
            "'fraction-train' = 0.1 gives 1 non-stragglers and 'fedfsc.fewshot-fraction' = 0.85 2 stragglers",
        ),
    ],
)
def test_the_population_must_hold_the_cohort_and_a_straggler(clients: int, f_n: float, f_fs: float, problem) -> None:
    found = straggler_population_problem(clients, f_n, f_fs)
    assert found is None if problem is None else problem in str(found), found


def test_a_population_without_room_for_a_straggler_stops_at_start(tmp_path: Path) -> None:
    config = small_run_config(tmp_path, method="fedfsc-plus", **{"fraction-train": 0.5})  # f_fs = 0.1 of 4: none
    with pytest.raises(RunSetupError, match="'fedfsc.fewshot-fraction' = 0.1 gives round"):
        run_in_process(config)


def test_a_run_with_f_n_plus_f_fs_of_one_stops_at_start(tmp_path: Path) -> None:
    config = small_run_config(
        tmp_path, method="fedfsc-plus", **{"fraction-train": 0.75, "fedfsc.fewshot-fraction": 0.25}
    )
    with pytest.raises(RunSetupError, match="'fraction-train' \\(f_n\\) \\+ 'fedfsc.fewshot-fraction' \\(f_fs\\)"):
        run_in_process(config)


# ---------------------------------------------------------------- the strategy against a fake grid

NODES = {11: 0, 22: 1, 33: 2, 44: 3}
COUNTS = {0: [30, 30], 1: [10, 10], 2: [25, 25], 3: [40, 0]}
HOLDS = {pid: sum(c) for pid, c in COUNTS.items()}
KEYS = ["head.weight", "head.bias"]


class Observer:
    def __init__(self) -> None:
        self.fields: list[dict[str, Any]] = []
        self.reply_fields: list[dict[str, Any]] = []

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None:
        self.fields.append({"cohort": cohort, **fields})

    def replies_received(self, server_round: int, client_stats: list, bytes_up: int, **fields: Any) -> None:
        self.reply_fields.append({"stats": client_stats, "bytes_up": bytes_up, **fields})

    def evaluations_received(self, server_round: int, **fields: Any) -> None: ...


def model_state(body: float, weight: float, bias: float) -> dict[str, torch.Tensor]:
    return {
        "body.w": torch.full((3,), body),
        "head.weight": torch.full((2, 3), weight),
        "head.bias": torch.full((2,), bias),
    }


def make_strategy(plan, fscprox: str = "none", aggregation: str = "mean") -> FewShotClassifierFedAvg:
    return FewShotClassifierFedAvg(
        plan=plan,
        settings=FedFscSettings(fewshot_fraction=0.5, fscprox=fscprox),
        local_epochs=10,
        classifier_keys=KEYS,
        frozen=ArrayRecord(),
        aggregation=AggregationSettings(aggregation),
        population=ClientPopulation(wait_seconds=0),
        label_counts=LabelCountRegistry(num_classes=2, noisy=False),
        select=lambda available, rnd: available[:2],  # partitions 0 and 1 are the non-stragglers
        observer=Observer(),
    )


def fewshot_reply(msg: Message, pid: int, weight: float, bias: float, *, with_update: dict | None = None) -> Message:
    few = MetricRecord(
        {FEWSHOT_SHOTS_USED: 10, FEWSHOT_CLASSES: 2, FEWSHOT_EXAMPLES: 20, FEWSHOT_LOSS: 0.3, FEWSHOT_SECONDS: 0.1}
    )
    records: dict[str, Any] = {
        FEWSHOT_CLASSIFIER: ArrayRecord(
            {"head.weight": torch.full((2, 3), weight), "head.bias": torch.full((2,), bias)}
        ),
        FEWSHOT_METRICS: few,
    }
    if with_update is None:
        records[METRICS] = MetricRecord(
            {
                PARTITION_ID: pid,
                NUM_EXAMPLES: 20,
                NUM_LOCAL: HOLDS[pid],
                TRAIN_LOSS: 0.3,
                TRAIN_SECONDS: 0.1,
                THREADS: 1,
            }
        )
    else:
        records[ARRAYS] = ArrayRecord(with_update)
        records[METRICS] = MetricRecord(train_metrics(pid, HOLDS[pid], HOLDS[pid]))
    return Message(RecordDict(records), reply_to=msg)


def round_messages(strategy: FewShotClassifierFedAvg, server_round: int, sent: dict[str, torch.Tensor]):
    grid = FakeGrid(NODES, client_responders(NODES, COUNTS))
    messages = list(strategy.configure_train(server_round, ArrayRecord(sent), ConfigRecord(), grid))
    return {NODES[m.metadata.dst_node_id]: m for m in messages}


def test_fedfsc_plus_roles_go_in_each_message_and_are_reported() -> None:
    strategy = make_strategy(FEDFSC_PLUS_PLAN)
    first = round_messages(strategy, 1, model_state(0, 0, 0))
    assert sorted(first) == [0, 1]  # round 1: the stragglers have no work
    assert {pid: read_role(m.content[CONFIG]) for pid, m in first.items()} == {0: Role(10, False), 1: Role(10, False)}
    # ... so they are recorded as dropped, not as used; `dropped` is straggler-fraction's, not FedFSC's
    started = strategy.observer.fields[-1]  # type: ignore[attr-defined]
    assert started["stragglers_used"] == [] and started["stragglers_dropped"] == [2, 3] and started["dropped"] == []
    second = round_messages(strategy, 2, model_state(0, 0, 0))
    assert sorted(second) == [0, 1, 2, 3]
    roles = {pid: read_role(m.content[CONFIG]) for pid, m in second.items()}
    assert roles == {0: Role(10, False), 1: Role(10, False), 2: Role(0, True), 3: Role(0, True)}
    fields = strategy.observer.fields[-1]  # type: ignore[attr-defined]
    assert fields["cohort"] == [0, 1, 2, 3] and fields["fewshot_clients"] == [2, 3] and fields["reduced_clients"] == []
    assert fields["stragglers_used"] == [2, 3] and fields["stragglers_dropped"] == []


def test_fedfsc_drops_every_straggler_and_says_so() -> None:
    """FedFSC (Alg. 1) has no work for stragglers: every client outside the cohort is one, dropped each round."""
    strategy = make_strategy(FEDFSC_PLAN)
    for server_round in (1, 2):
        assert sorted(round_messages(strategy, server_round, model_state(0, 0, 0))) == [0, 1]
        fields = strategy.observer.fields[-1]  # type: ignore[attr-defined]
        assert fields["stragglers_used"] == [] and fields["stragglers_dropped"] == [2, 3]


def test_straggler_fields_split_the_clients_outside_the_cohort_by_what_they_did() -> None:
    roles = {0: Role(10, False), 4: Role(1, False), 5: Role(0, True)}
    fields = straggler_fields(range(8), [0], [5, 4, 6], roles)  # 1: selected, then dropped by straggler-fraction
    assert fields == {"stragglers_used": [4, 5], "stragglers_dropped": [1, 2, 3, 6, 7]}


def test_base_is_fedavg_of_the_normal_updates_and_the_global_model_takes_the_uniform_fewshot_mean() -> None:
    strategy = make_strategy(FEDFSC_PLUS_PLAN)
    sent = model_state(1.0, 1.0, 1.0)  # the base distributed this round: {θ^t, φ^t}
    messages = round_messages(strategy, 2, sent)
    replies = [
        train_reply(messages[0], model_state(3.0, 3.0, 3.0), train_metrics(0, 60, 60)),
        train_reply(messages[1], model_state(7.0, 7.0, 7.0), train_metrics(1, 20, 20)),
        fewshot_reply(messages[2], 2, weight=2.0, bias=-2.0),  # holds 50 samples
        fewshot_reply(messages[3], 3, weight=6.0, bias=4.0),  # holds 40: weights would differ; uniform they are not
    ]
    base, _ = strategy.aggregate_train(2, replies)
    assert base is not None
    expected_base = (60 * 3.0 + 20 * 7.0) / 80  # the few-shot-only clients are not in the base
    new_base = base.to_torch_state_dict()
    assert all(torch.allclose(new_base[k], torch.full_like(sent[k], expected_base)) for k in sent)
    composed = strategy.global_arrays(base).to_torch_state_dict()
    assert torch.equal(composed["body.w"], sent["body.w"])  # φ^t: the distributed base, not the new one
    assert torch.allclose(composed["head.weight"], torch.full((2, 3), 4.0))  # (2 + 6) / 2
    assert torch.allclose(composed["head.bias"], torch.full((2,), 1.0))  # (−2 + 4) / 2
    report = strategy.observer.reply_fields[-1]  # type: ignore[attr-defined]
    assert report["base_updates"] == 2 and report["fewshot_updates"] == 2
    stats = {s["partition_id"]: s for s in report["stats"]}
    assert stats[2]["fewshot_examples"] == 20 and "fewshot_seconds" not in stats[0]
    classifier_bytes = ArrayRecord({k: sent[k] for k in KEYS}).count_bytes()
    assert report["bytes_up"] == 2 * ArrayRecord(sent).count_bytes() + 2 * classifier_bytes


def test_a_round_without_fewshot_updates_returns_the_new_base_as_global_model() -> None:
    strategy = make_strategy(FEDFSC_PLAN)
    messages = round_messages(strategy, 1, model_state(1.0, 1.0, 1.0))
    replies = [
        train_reply(m, model_state(2.0, 2.0, 2.0), train_metrics(pid, HOLDS[pid], HOLDS[pid]))
        for pid, m in messages.items()
    ]
    base, _ = strategy.aggregate_train(1, replies)
    assert base is not None and strategy.global_arrays(base) is base


@pytest.mark.parametrize(
    ("pid", "change", "reason"),
    [
        (2, "no classifier", "missing record fewshot-classifier"),
        (2, "wide classifier", "head.weight has shape (2, 4)"),
        (2, "too many shots", "exceeds the 10 shots asked for"),
        (0, "update instead of classifier", "unexpected record"),
        (0, "classifier without update", "missing record arrays"),
    ],
)
def test_replies_that_do_not_match_the_role_are_refused(pid: int, change: str, reason: str) -> None:
    strategy = make_strategy(FEDFSC_PLUS_PLAN)
    messages = round_messages(strategy, 2, model_state(1.0, 1.0, 1.0))
    reply = (
        fewshot_reply(messages[pid], pid, 1.0, 1.0)
        if pid == 2
        else train_reply(messages[0], model_state(2.0, 2.0, 2.0), train_metrics(0, 60, 60))
    )
    content = reply.content
    if change == "no classifier":
        del content[FEWSHOT_CLASSIFIER]
    elif change == "wide classifier":
        content[FEWSHOT_CLASSIFIER] = ArrayRecord({"head.weight": torch.zeros(2, 4), "head.bias": torch.zeros(2)})
    elif change == "too many shots":
        content[FEWSHOT_METRICS] = MetricRecord(
            {FEWSHOT_SHOTS_USED: 11, FEWSHOT_CLASSES: 1, FEWSHOT_EXAMPLES: 11, FEWSHOT_LOSS: 0.3, FEWSHOT_SECONDS: 0.1}
        )
    elif change == "update instead of classifier":
        content[FEWSHOT_CLASSIFIER] = ArrayRecord({"head.weight": torch.zeros(2, 3), "head.bias": torch.zeros(2)})
    elif change == "classifier without update":
        content = fewshot_reply(messages[0], 0, 1.0, 1.0).content
    outcome = strategy.sort_replies([Message(content, reply_to=messages[pid])])
    assert pid in outcome.rejected and reason in outcome.rejected[pid], outcome.rejected


def test_fscprox_sends_the_last_fewshot_classifier_to_normal_updates_only() -> None:
    strategy = make_strategy(FEDFSC_PLUS_PLAN, fscprox="fewshot")
    messages = round_messages(strategy, 2, model_state(1.0, 1.0, 1.0))
    assert not any(FEWSHOT_ANCHOR in m.content.array_records for m in messages.values())  # none yet
    strategy.aggregate_train(
        2,
        [
            train_reply(messages[0], model_state(3.0, 3.0, 3.0), train_metrics(0, 60, 60)),
            fewshot_reply(messages[2], 2, weight=5.0, bias=5.0),
        ],
    )
    third = round_messages(strategy, 3, model_state(1.0, 1.0, 1.0))
    for message in third.values():
        role = read_role(message.content[CONFIG])
        assert (FEWSHOT_ANCHOR in message.content.array_records) == (role.epochs > 0)
    anchor = third[0].content.array_records[FEWSHOT_ANCHOR].to_torch_state_dict()
    assert torch.equal(anchor["head.weight"], torch.full((2, 3), 5.0))


def test_the_strategy_state_survives_a_checkpoint() -> None:
    strategy = make_strategy(FEDFSC_PLAN)
    messages = round_messages(strategy, 2, model_state(1.0, 1.0, 1.0))
    strategy.aggregate_train(
        2, [fewshot_reply(m, pid, 2.0, 2.0, with_update=model_state(2.0, 2.0, 2.0)) for pid, m in messages.items()]
    )
    restored = make_strategy(FEDFSC_PLAN)
    restored.load_state_dict(strategy.state_dict())
    carried = ArrayRecord(model_state(9.0, 9.0, 9.0))
    kept, original = restored.global_arrays(carried), strategy.global_arrays(carried)
    assert kept is not carried and kept.keys() == original.keys()
    assert all((kept[k].numpy() == original[k].numpy()).all() for k in kept)


# ---------------------------------------------------------------- the client's pieces


def test_read_role_refuses_a_malformed_config() -> None:
    assert read_role(ConfigRecord({FULL_EPOCHS: 0, FEWSHOT: True})) == Role(0, True)
    for bad, key in (({FULL_EPOCHS: -1, FEWSHOT: True}, FULL_EPOCHS), ({FULL_EPOCHS: 1, FEWSHOT: 1}, FEWSHOT)):
        with pytest.raises(ValueError, match=key):
            read_role(ConfigRecord(bad))
    with pytest.raises(ValueError, match="no work"):
        read_role(ConfigRecord({FULL_EPOCHS: 0, FEWSHOT: False}))


@pytest.mark.parametrize("anchored", [True, False])
def test_classifier_prox_adds_mu_times_the_distance_to_the_anchor(anchored: bool) -> None:
    torch.manual_seed(0)
    model = build_model("lenet5", in_channels=1, num_classes=10)
    config = make_config(method="fedfsc", fscprox="fewshot" if anchored else "base", fscprox_mu=0.3)
    params = list(model.parameters())
    training = LocalTraining(model, "none", params, model, config, RecordDict(), lambda x: x)
    anchor = {k: torch.full_like(v, 0.5) for k, v in model.state_dict().items() if k in model.classifier_keys()}
    objective = with_classifier_prox(CrossEntropy, anchor if anchored else None, 0.3)(training)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.stages["head"].weight.add_(1.0)
    x, y = torch.randn(3, 1, 32, 32), torch.tensor([1, 2, 3])
    target = anchor if anchored else {k: start[k] for k in model.classifier_keys()}
    head = model.stages["head"]
    expected = torch.nn.functional.cross_entropy(model(x), y) + fscprox_penalty(
        [head.weight, head.bias], [target["stages.head.weight"], target["stages.head.bias"]], 0.3
    )
    torch.testing.assert_close(objective.loss(x, y), expected)


# ---------------------------------------------------------------- every preset end to end, in one process

STRAGGLERS = {"fraction-train": 0.5, "fedfsc.fewshot-fraction": 0.25, "local-epochs": 2}


def run(tmp_path: Path, name: str, **overrides: Any) -> list[dict[str, Any]]:
    config = small_run_config(tmp_path, **{"pretrain": "none", "aggregation": "mean", "run-name": name, **overrides})
    run_in_process(for_run(config))  # a FedAvg run beside FedFSC+ leaves out its `fedfsc.fewshot-fraction`
    return rounds_of(tmp_path / "results", name)


def test_fedfsc_trains_fedavgs_model_bit_for_bit_and_adds_the_fewshot_classifier(tmp_path: Path) -> None:
    fedavg = run(tmp_path, "fedavg", method="fedavg")
    fedfsc = run(tmp_path, "fedfsc", method="fedfsc")
    assert [r["base_loss"] for r in fedfsc] == [r["loss"] for r in fedavg]
    assert [r["base_accuracy"] for r in fedfsc] == [r["accuracy"] for r in fedavg]
    assert fedfsc[0]["accuracy"] == fedfsc[0]["base_accuracy"] and fedfsc[0]["fewshot_clients"] == []
    for record in fedfsc[1:]:
        assert record["fewshot_clients"] == [0, 1, 2, 3] and record["fewshot_updates"] == 4
        assert len(record["fewshot_client_accuracies"]) == 4 and 0 <= record["fewshot_client_mean_accuracy"] <= 1
        for stats in record["client_stats"]:
            assert 0 < stats["fewshot_seconds"] < stats["train_seconds"] and stats["fewshot_shots"] >= 1
    summary = json.loads((tmp_path / "results" / "fedfsc" / "summary.json").read_text())
    assert summary["best_base_accuracy"] == max(r["base_accuracy"] for r in fedfsc)
    assert summary["best_accuracy"] == max(r["accuracy"] for r in fedfsc)

    # Uplink: each client sends the full model (as FedAvg) plus one Linear layer.
    model = build_model("lenet5", in_channels=3, num_classes=4)
    classifier = ArrayRecord({k: v for k, v in model.state_dict().items() if k in model.classifier_keys()})
    assert fedfsc[1]["bytes_up"] == fedavg[1]["bytes_up"] + 4 * classifier.count_bytes()
    assert uplink_bytes(model.state_dict(), model.classifier_keys(), full=False, fewshot=True) == (84 * 4 + 4) * 4
    assert (tmp_path / "results" / "fedfsc" / "accuracy.png").exists()


def test_fedfsc_over_fedft_eds_trains_fedft_eds_model_bit_for_bit(tmp_path: Path) -> None:
    """Composes with what exists: a frozen φ and entropy-selected data in the base trainer (FedFT-EDS); the
    few-shot update still tunes the final Linear on the frozen extractor's features."""
    eds = {"freeze": "mid", "data-selection": "entropy", "selection-fraction": 0.5, "num-server-rounds": 2}
    fedft = run(tmp_path, "fedft", method="fedft-eds", **eds)
    fedfsc = run(tmp_path, "fedfsc", method="fedfsc", **eds)
    assert [r["base_loss"] for r in fedfsc] == [r["loss"] for r in fedft]
    assert fedfsc[1]["fewshot_updates"] == 4 and fedfsc[1]["loss"] != fedfsc[1]["base_loss"]  # {θ_fs, φ} ≠ base


def test_fedfsc_plus_trains_the_model_of_fedavg_that_drops_its_stragglers(tmp_path: Path) -> None:
    """The thesis's named baseline (Table 4.5, "FedAvg"): FedAvg over the same f_n, stragglers dropped. FedFSC+'s
    base model is that run's model bit for bit, so a paired difference isolates the few-shot classifier."""
    fedavg = run(tmp_path, "fedavg", method="fedavg", **STRAGGLERS)
    plus = run(tmp_path, "plus", method="fedfsc-plus", **STRAGGLERS)
    assert [r["base_loss"] for r in plus] == [r["loss"] for r in fedavg]
    assert all(r["clients"] == p["clients"][:2] for r, p in zip(fedavg, plus))  # the same non-stragglers
    assert all(r["accuracy"] != r["base_accuracy"] and r["fewshot_updates"] == 1 for r in plus[1:])


def test_fedfsc_plus_baseline_plus_trains_fedavg_plus_model(tmp_path: Path) -> None:
    plus = run(tmp_path, "plus", method="fedavg-plus", **STRAGGLERS)
    both = run(tmp_path, "both", method="fedfsc-plus-baseline-plus", **STRAGGLERS)
    assert [r["base_loss"] for r in both] == [r["loss"] for r in plus]
    for a, b in zip(plus, both):
        assert a["clients"] == b["clients"] and len(a["clients"]) == 3  # 2 non-stragglers + 1 straggler
        assert a["reduced_clients"] == b["reduced_clients"] == a["clients"][2:]
    assert both[0]["fewshot_clients"] == [] and all(r["fewshot_clients"] == r["clients"][2:] for r in both[1:])


@pytest.mark.parametrize(
    ("method", "overrides"),
    [
        ("moon", {}),
        ("fedfsc-plus", {**STRAGGLERS, "fedfsc.fscprox": "fewshot"}),
        ("fedprox-plus", STRAGGLERS),
        ("moon-plus", STRAGGLERS),
        ("fedfsc", {"objective": "contrastive", "fedfsc.fscprox": "base"}),
        ("fedfsc", {"aggregation": "clipped-mean", "fraction-evaluate": 0.5}),  # the app's default rule
        # Krum with f = 0 needs 3 updates: the 3 normal updates have them, the 1 few-shot classifier has not
        (
            "fedfsc-plus",
            {"aggregation": "krum", "byzantine-clients": 0, "fraction-train": 0.75, "fedfsc.fewshot-fraction": 0.2},
        ),
    ],
)
def test_every_preset_runs_end_to_end(tmp_path: Path, method: str, overrides: dict[str, Any]) -> None:
    rounds = run(tmp_path, method, method=method, **overrides)
    assert len(rounds) == 3 and all(r["aggregated"] and not r["rejected"] and not r["failed"] for r in rounds)
    if overrides.get("aggregation") == "krum":  # the classifier is not used: the global model is the base
        assert all(r["accuracy"] == r["base_accuracy"] and r["fewshot_updates"] == 1 for r in rounds[1:])
    if overrides.get("fraction-evaluate"):
        assert all(r["evaluated"] == 2 and r["federated_accuracy"] is not None for r in rounds)
    if overrides is STRAGGLERS:  # baseline+: 2 non-stragglers and 1 straggler running E_r epochs, every round
        assert all(len(r["clients"]) == 3 and r["reduced_clients"] == r["clients"][2:] for r in rounds)
    if method == "fedfsc-plus":  # the straggler has no work in round 1
        assert len(rounds[0]["clients"]) == len(rounds[1]["clients"]) - 1 and rounds[0]["fewshot_clients"] == []
        assert all(len(r["fewshot_clients"]) == 1 and r["fewshot_updates"] == 1 for r in rounds[1:])


def test_moon_clients_keep_their_model_for_the_next_round(tmp_path: Path) -> None:
    config = small_run_config(tmp_path, method="moon", pretrain="none", **{"num-server-rounds": 1})
    grid = run_in_process(config)
    assert all("moon-previous-model" in context.state.array_records for context in grid.contexts.values())


def test_a_killed_fedfsc_run_resumes_as_the_uninterrupted_one(tmp_path: Path) -> None:
    overrides = {**STRAGGLERS, "method": "fedfsc-plus", "fedfsc.fscprox": "fewshot", "num-server-rounds": 4}
    first = run(tmp_path, "a", **overrides)
    config = small_run_config(tmp_path, **{"pretrain": "none", "aggregation": "mean", "run-name": "b", **overrides})
    with pytest.raises(ServerKilled):
        run_in_process(config, kill_at_round=4)
    run_in_process({**config, "resume": True})
    resumed = rounds_of(tmp_path / "results", "b")
    for record in first + resumed:
        record.pop("bytes_down")  # measured on the wire; the resumed run is a new Flower run (README, resume)
        for stats in record["client_stats"]:
            stats.pop("fewshot_seconds", None)  # a duration
    assert without_timings(resumed) == without_timings(first)
