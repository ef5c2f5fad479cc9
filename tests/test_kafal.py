"""KAFAL's loop end to end in one process (pools, budgets, the labeller, cycles.jsonl, the query's validation), its
settings checks, its schedule and its local update."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import Message, MetricRecord, RecordDict

import methods.kafal.method as kafal
import tests.in_process as in_process
from client_app.local_data import load_local_data
from client_app.node import Node
from methods.kafal import client_state
from methods.kafal.kcfu import KCFUOptions
from methods.kafal.labelling import QUERIES_FILE, LabelsFile
from methods.kafal.local_update import LocalSGD, UnlabelledBatches, kcfu_update
from methods.kafal.pools import initial_labelled_size, query_budget
from methods.kafal.records import AL_COUNTS_RECORD, AL_QUERY, AL_QUERY_RECORD, NUM_QUERIED, read_al_query_reply
from methods.kafal.schedule import CycleSchedule, labelled_after, pool_problem
from methods.registry import parse_config
from models import build_model
from protocol.messages import COUNTS
from protocol.replies import Identity, Refused
from run_config import ConfigError, federated_split
from run_config.defaults import load_defaults
from server_app.run_errors import RunSetupError
from tests.in_process import run_in_process, small_run_config

PARTITIONS = 4
AL = {
    "method": "kafal",
    "model": "mlp-2nn",
    "pretrain": "none",
    "public-fraction": 0.0,
    "aggregation": "mean",
    "fraction-train": 0.5,
    "kafal.al-initial-fraction": 0.2,
    "kafal.al-budget-fraction": 0.1,
    "kafal.al-cycles": 2,
    "kafal.al-rounds-per-cycle": 2,
    "num-server-rounds": 6,
}


def kafal_config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    return small_run_config(tmp_path, **{**AL, **overrides})


class RecordingLabeller:
    """Every index each client's labeller was asked for, answered from the partition's true labels."""

    def __init__(self) -> None:
        self.asked: dict[int, list[int]] = {}

    def factory(self, node: Node, labels: torch.Tensor):
        true = load_local_data(federated_split(node.config), node.partition_id, node.num_partitions).labels

        def label(indices: torch.Tensor) -> torch.Tensor:
            self.asked.setdefault(node.partition_id, []).extend(indices.tolist())
            return true[indices].clone()

        return label


@pytest.fixture
def labeller(monkeypatch: pytest.MonkeyPatch) -> RecordingLabeller:
    """A recording labeller, and client data whose labels are all −1: a label read anywhere but through the
    labeller would fail training (cross-entropy refuses −1) or the pools' checks."""
    recording = RecordingLabeller()
    monkeypatch.setattr(kafal, "labeller_for", recording.factory)
    real_data = Node.data
    monkeypatch.setattr(
        Node,
        "data",
        lambda self: dataclasses.replace(real_data(self), labels=torch.full_like(real_data(self).labels, -1)),
    )
    return recording


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_loop_end_to_end(tmp_path: Path, labeller: RecordingLabeller) -> None:
    grid = run_in_process(kafal_config(tmp_path, **{"kafal.al-query": "kafal"}), num_partitions=PARTITIONS)
    run = tmp_path / "results" / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == 6
    sizes = {
        pid: len(load_local_data(federated_split(parse_config(kafal_config(tmp_path))), pid, PARTITIONS))
        for pid in range(PARTITIONS)
    }
    for pid, n in sizes.items():
        asked = labeller.asked[pid]
        # the initial draw, then exactly one budget per query, never the same sample twice
        assert len(asked) == labelled_after(n, 0.2, 0.1, 2) == initial_labelled_size(n, 0.2) + 2 * query_budget(n, 0.1)
        assert len(set(asked)) == len(asked)
        context = grid.contexts[101 + pid]
        pool = client_state.load_pool(context.state, n, lambda i: pytest.fail("a kept pool asks nobody"))
        assert pool is not None
        assert sorted(pool.labelled.tolist()) == sorted(asked)  # exactly what was asked, and nothing else
        assert set(pool.labelled.tolist()).isdisjoint(pool.unlabelled.tolist())
        assert len(pool.labelled) + len(pool.unlabelled) == n
    rounds = read_jsonl(run / "rounds.jsonl")
    for record in rounds:  # the FedAvg weight is the labelled pool the client held in that round
        cycle = (record["round"] - 1) // 2
        for stats in record["client_stats"]:
            assert stats["num_examples"] == labelled_after(sizes[stats["partition_id"]], 0.2, 0.1, cycle)
    assert [r["clients"] for r in rounds if r["round"] % 2 == 0] == [[0, 1, 2, 3]] * 3  # last rounds: every client
    cycles = read_jsonl(run / "cycles.jsonl")
    assert [c["cycle"] for c in cycles] == [0, 1, 2] and [c["rounds"] for c in cycles] == [[1, 2], [3, 4], [5, 6]]
    total = sum(sizes.values())
    for cycle in cycles:
        trained = sum(labelled_after(n, 0.2, 0.1, cycle["cycle"]) for n in sizes.values())
        after = sum(labelled_after(n, 0.2, 0.1, min(cycle["cycle"] + 1, 2)) for n in sizes.values())
        assert cycle["trained_labelled_fraction"] == pytest.approx(trained / total)
        assert cycle["labelled_fraction"] == pytest.approx(after / total)
        assert cycle["accuracy"] == next(r["accuracy"] for r in rounds if r["round"] == cycle["rounds"][1])
        assert sum(sum(counts) for counts in cycle["labelled_counts"].values()) == after
        assert cycle["bytes_down"] >= sum(r["bytes_down"] for r in rounds if r["round"] in cycle["rounds"])
    assert cycles[0]["queried"] == {str(pid): query_budget(n, 0.1) for pid, n in sizes.items()}
    assert cycles[0]["query_problems"] == [] and cycles[0]["query_bytes_down"] > 0
    assert cycles[2]["queried"] == {} and cycles[2]["query_seconds"] == 0.0
    assert [c["accuracy"] for c in summary["cycles"]] == [c["accuracy"] for c in cycles]
    assert (run / "labelled_accuracy.png").is_file()


@pytest.mark.parametrize("query", ["random", "coreset", "ll4al", "qbc"])
def test_every_kind_of_strategy_runs_the_loop(tmp_path: Path, labeller: RecordingLabeller, query: str) -> None:
    config = kafal_config(tmp_path, **{"kafal.al-query": query, "kafal.al-cycles": 1, "num-server-rounds": 4})
    run_in_process(config, num_partitions=PARTITIONS)
    cycles = read_jsonl(tmp_path / "results" / "run" / "cycles.jsonl")
    assert len(cycles) == 2 and cycles[0]["query_problems"] == []
    assert cycles[1]["trained_labelled_fraction"] > cycles[0]["trained_labelled_fraction"]


def test_global_sampling_scores_with_the_received_model(tmp_path: Path, labeller: RecordingLabeller) -> None:
    config = kafal_config(
        tmp_path,
        **{
            "kafal.al-query": "entropy",
            "kafal.al-sampling-model": "global",
            "kafal.al-cycles": 1,
            "num-server-rounds": 4,
        },
    )
    run_in_process(config, num_partitions=PARTITIONS)
    assert read_jsonl(tmp_path / "results" / "run" / "cycles.jsonl")[0]["query_problems"] == []


def test_a_bad_query_reply_is_refused_and_named(
    tmp_path: Path, labeller: RecordingLabeller, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = in_process.HANDLERS[AL_QUERY]

    def lying(msg: Message, context) -> Message:  # partition 1 claims one more queried sample than its budget
        reply = honest(msg, context)
        if context.node_config["partition-id"] == 1:
            reply.content[AL_QUERY_RECORD][NUM_QUERIED] = int(reply.content[AL_QUERY_RECORD][NUM_QUERIED]) + 1
        return reply

    monkeypatch.setitem(in_process.HANDLERS, AL_QUERY, lying)
    run_in_process(kafal_config(tmp_path), num_partitions=PARTITIONS)
    run = tmp_path / "results" / "run"
    cycles = read_jsonl(run / "cycles.jsonl")
    problems = cycles[0]["query_problems"]
    assert [p["partition_id"] for p in problems] == [1] and "'num-queried'" in problems[0]["reason"]
    assert "1" not in cycles[0]["queried"] and "1" not in cycles[0]["labelled_counts"]
    # its pool size is unknown from then on: its updates are still accepted (bounded only by what it holds)
    later = [r for r in read_jsonl(run / "rounds.jsonl") if r["round"] > 2]
    assert all(not r["rejected"] for r in later)
    assert any(s["partition_id"] == 1 for r in later for s in r["client_stats"])


def query_reply(
    partition_id: int = 0,
    num_local: int = 20,
    queried: int = 2,
    labelled: int = 6,
    counts: list | None = None,
    **extra: Any,
) -> RecordDict:
    numbers = {
        "partition-id": partition_id,
        "num-local": num_local,
        "num-queried": queried,
        "num-labelled": labelled,
        "query-seconds": 0.5,
        **extra,
    }
    return RecordDict(
        {
            AL_QUERY_RECORD: MetricRecord(numbers),
            AL_COUNTS_RECORD: MetricRecord({COUNTS: counts if counts is not None else [3, 3, 0]}),
        }
    )


@pytest.mark.parametrize(
    ("reply", "before", "reason"),
    [
        (query_reply(partition_id=1), None, "partition-id 1"),
        (query_reply(num_local=21), None, "'num-local'"),
        (query_reply(queried=3), None, "budget is 2"),
        (query_reply(), 5, "expected 5 labelled before"),
        (query_reply(labelled=30, counts=[30, 0, 0]), None, "exceeds the 20"),
        (query_reply(counts=[3, 2, 0]), None, "add up to 5"),
        (query_reply(counts=[3, 3]), None, "3 whole numbers"),
        (query_reply(counts=[3.0, 3.0, 0.0]), None, "not a list of whole numbers"),
        (query_reply(counts=[7, -1, 0]), None, "whole numbers >= 0"),
        (query_reply(**{"extra": 1}), None, "unexpected extra"),
        (RecordDict({AL_QUERY_RECORD: MetricRecord({"partition-id": 0})}), None, "missing record"),
    ],
)
def test_query_replies_are_validated(reply: RecordDict, before: int | None, reason: str) -> None:
    with pytest.raises(Refused, match=reason):
        read_al_query_reply(reply, Identity(0, 4, 20), 3, 2, before)


def test_labelled_counts_may_not_shrink() -> None:
    report = read_al_query_reply(query_reply(), Identity(0, 4, 20), 3, 2, 4, np.array([2, 2, 0]))
    assert report.num_labelled == 6 and report.counts.tolist() == [3, 3, 0]
    with pytest.raises(Refused, match="shrank"):
        read_al_query_reply(query_reply(counts=[4, 2, 0]), Identity(0, 4, 20), 3, 2, 4, np.array([2, 3, 0]))


def parsed(**overrides: Any) -> Any:
    return parse_config({**load_defaults(), **AL, "dataset": "synthetic", **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kafal.al-initial-fraction": 0.0}, "'kafal.al-initial-fraction' = 0.0 is invalid: it must be in \\(0, 1\\)"),
        ({"kafal.al-initial-fraction": 1.0}, "'kafal.al-initial-fraction' = 1.0 is invalid"),
        ({"kafal.al-budget-fraction": 1.5}, "'kafal.al-budget-fraction' = 1.5 is invalid"),
        ({"kafal.al-query": "bald"}, "'kafal.al-query' = 'bald' is invalid: it must be one of 'kafal'"),
        (
            {"kafal.al-query": "kafal", "kafal.al-sampling-model": "global"},
            "'kafal.al-sampling-model' = 'global' is not possible",
        ),
        ({"kafal.al-query": "qbc", "kafal.al-sampling-model": "global"}, "with 'kafal.al-query' = 'qbc'"),
        ({"kafal.al-query": "ll4al", "kafal.al-sampling-model": "global"}, "with 'kafal.al-query' = 'll4al'"),
        ({"kafal.al-initial-fraction": 0.5, "kafal.al-budget-fraction": 0.3}, "exceeds the whole local data"),
        ({"num-server-rounds": 10}, "'num-server-rounds' = 10, but KAFAL runs .* set it to 6"),
        ({"freeze": "mid"}, "'freeze' = 'mid' does not apply to KAFAL"),
        ({"client-selection": "fedentopt"}, "'client-selection' = 'fedentopt' does not apply"),
        ({"fraction-evaluate": 0.5}, "'fraction-evaluate' must be 0 with KAFAL"),
        ({"evaluate-every": 2}, "'evaluate-every' = 2: KAFAL records each cycle's accuracy"),
    ],
)
def test_settings_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parsed(**overrides)


def test_the_preset_starts_from_random_weights_and_restarts_every_cycle() -> None:
    """``method = "kafal"`` alone runs as the paper's Alg. 1: no pretraining, Ω⁰ again at each cycle's start, and
    its schedule fills the app's default rounds; an explicit ``pretrain`` still wins."""
    defaults = {**load_defaults(), "method": "kafal"}
    config = parse_config(defaults)
    settings = config.settings(kafal.KAFALSettings)
    assert config.pretrain == "none" and settings.al_reinitialise
    assert kafal.schedule_of(settings).total_rounds == config.num_server_rounds
    assert parse_config({**defaults, "pretrain": "public"}).pretrain == "public"
    assert parse_config({**defaults, "method": "fedavg"}).pretrain == "dataset"


def test_global_sampling_accepted_where_the_strategy_allows_it() -> None:
    for query in ("random", "entropy", "margin", "coreset", "badge", "alfa-mix"):
        assert parsed(**{"kafal.al-query": query, "kafal.al-sampling-model": "global"}).method == "kafal"


def test_budget_beyond_a_clients_unlabelled_pool_is_refused_at_start(tmp_path: Path) -> None:
    # ⌈0.5·n⌉ + 2·⌈0.25·n⌉ fits the whole data on paper, but not once rounded up for an odd-sized client
    overrides = {"kafal.al-initial-fraction": 0.5, "kafal.al-budget-fraction": 0.25}
    config = parsed(**overrides)
    kafal.check_kafal(config, {0: 20})
    with pytest.raises(ConfigError, match="exceeds the unlabelled pool of client 3: a client of 7 samples would"):
        kafal.check_kafal(config, {0: 20, 3: 7})
    with pytest.raises(RunSetupError, match="exceeds the unlabelled pool of client"):
        run_in_process(
            kafal_config(tmp_path, **overrides, **{"min-partition-size": 1, "dirichlet-alpha": 0.05}),
            num_partitions=PARTITIONS,
        )


def test_schedule() -> None:
    schedule = CycleSchedule(rounds_per_cycle=3, cycles=2)
    assert schedule.total_rounds == 9
    assert [schedule.cycle_of(r) for r in range(1, 10)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [schedule.round_in_cycle(r) for r in range(1, 7)] == [1, 2, 3, 1, 2, 3]
    assert [r for r in range(1, 10) if schedule.queries_after(r)] == [3, 6]
    assert [r for r in range(1, 10) if schedule.ends_cycle(r)] == [3, 6, 9] and schedule.rounds_of(2) == (7, 9)
    assert labelled_after(30, 0.1, 0.05, 5) == 3 + 5 * 2
    assert pool_problem(10, 0.1, 0.3, 3) is None and pool_problem(10, 0.2, 0.3, 3) is not None


def test_unlabelled_batches_cover_the_pool_before_repeating() -> None:
    batches = UnlabelledBatches(torch.arange(10.0)[:, None], 4, torch.Generator().manual_seed(0))
    first_pass = torch.cat([batches.next() for _ in range(3)]).flatten().tolist()
    assert sorted(first_pass) == list(range(10))
    assert UnlabelledBatches(torch.empty(0, 1), 4, torch.Generator()).next() is None


def test_kcfu_update_compensates_only_when_asked() -> None:
    torch.manual_seed(0)
    model = build_model("mlp-2nn", 1, 4)
    labelled, labels = torch.randn(12, 1, 32, 32), torch.tensor([0, 1, 2] * 4)
    unlabelled = torch.randn(20, 1, 32, 32)
    counts = torch.tensor([4.0, 4.0, 4.0, 0.0])
    sgd = LocalSGD(epochs=2, batch_size=4, learning_rate=0.05, momentum=0.9, weight_decay=0.0)
    before = [p.detach().clone() for p in model.parameters()]
    first = kcfu_update(
        model,
        labelled,
        labels,
        unlabelled,
        counts,
        sgd,
        KCFUOptions.from_nu(0.5),
        compensate=False,
        generator=torch.Generator().manual_seed(1),
    )
    assert (
        first.compensation_loss == 0.0 and math.isfinite(first.loss) and first.loss == pytest.approx(first.client_loss)
    )
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    later = kcfu_update(
        model,
        labelled,
        labels,
        unlabelled,
        counts,
        sgd,
        KCFUOptions.from_nu(0.5),
        compensate=True,
        generator=torch.Generator().manual_seed(1),
    )
    assert later.compensation_loss > 0 and later.loss == pytest.approx(
        0.5 * later.client_loss + 0.5 * later.compensation_loss, rel=0.2
    )


def test_labels_file_logs_what_it_is_asked(tmp_path: Path) -> None:
    np.save(tmp_path / "labels.npy", np.array([3, 1, 4, 1, 5], dtype=np.int64))
    labeller = LabelsFile(tmp_path)
    assert labeller(torch.tensor([4, 0])).tolist() == [5, 3]
    assert labeller(torch.tensor([2])).tolist() == [4]
    assert read_jsonl(tmp_path / QUERIES_FILE) == [{"indices": [4, 0]}, {"indices": [2]}]


def test_kcfu_options_follow_the_settings() -> None:
    paper = kafal.kcfu_options(parsed().settings(kafal.KAFALSettings))
    assert (paper.client_weight, paper.compensation_weight, paper.kl_reduction, paper.normalise_gamma) == (
        0.5,
        0.5,
        "sum",
        True,
    )
    code = kafal.kcfu_options(parsed(**{"kafal.kafal-update": "authors-code"}).settings(kafal.KAFALSettings))
    assert (code.client_weight, code.compensation_weight, code.pairing, code.kl_reduction) == (
        1.0,
        1.0,
        "shared",
        "class-mean",
    )
    ablation = kafal.kcfu_options(
        parsed(**{"kafal.kafal-gamma": "uniform", "kafal.kafal-balanced": False, "kafal.kafal-mixing": False}).settings(
            kafal.KAFALSettings
        )
    )
    assert (ablation.class_weighting, ablation.balanced, ablation.mixing) == ("uniform", False, False)
    assert not kafal.kcfu_options(
        parsed(**{"kafal.kafal-gamma": "paper"}).settings(kafal.KAFALSettings)
    ).normalise_gamma


def test_partial_work_stragglers_train_their_shortened_epochs(
    tmp_path: Path, labeller: RecordingLabeller, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: dict[int, list[int]] = {}  # partition -> the epochs of each of its KCFU updates, in order
    real = kafal.train_on_pool

    def recording(node: Node, model, pool, optimisation: LocalSGD, compensate, seed, loss_module=None):
        ran.setdefault(node.partition_id, []).append(optimisation.epochs)
        return real(node, model, pool, optimisation, compensate, seed, loss_module)

    monkeypatch.setattr(kafal, "train_on_pool", recording)
    stragglers = {
        "straggler-fraction": 0.5,
        "straggler-mode": "constant",
        "straggler-work": "partial",
        "local-epochs": 4,
        "fraction-train": 1.0,
        "kafal.al-cycles": 1,
        "num-server-rounds": 4,
    }
    run_in_process(kafal_config(tmp_path, **stragglers), num_partitions=PARTITIONS)
    rounds = read_jsonl(tmp_path / "results" / "run" / "rounds.jsonl")
    assert len(rounds) == 4 and all(not r["rejected"] and not r["dropped"] for r in rounds)
    slow = [sorted(int(pid) for pid in r["partial_epochs"]) for r in rounds]
    assert len(slow[0]) == 2 and slow == [slow[0]] * 4  # 'constant': the same two every round
    assert all(sorted(r["clients"]) == list(range(PARTITIONS)) for r in rounds)  # every client, every round
    for pid in range(PARTITIONS):  # each update ran the round's epochs: its shortened ones when it straggled
        assert ran[pid] == [r["partial_epochs"].get(str(pid), 4) for r in rounds]
    assert any(e < 4 for epochs in ran.values() for e in epochs)


def test_constant_stragglers_without_work_are_the_same_every_round(tmp_path: Path, labeller: RecordingLabeller) -> None:
    stragglers = {"straggler-fraction": 0.25, "straggler-mode": "constant", "fraction-train": 1.0}
    run_in_process(kafal_config(tmp_path, **stragglers), num_partitions=PARTITIONS)
    run = tmp_path / "results" / "run"
    rounds = read_jsonl(run / "rounds.jsonl")
    assert len(rounds) == 6 and len(rounds[0]["dropped"]) == 1
    assert all(r["dropped"] == rounds[0]["dropped"] and rounds[0]["dropped"][0] not in r["clients"] for r in rounds)
    assert read_jsonl(run / "cycles.jsonl")[0]["query_problems"] == []  # the idle client still queries
