"""FedSplit end to end: the client's metadata, the server's checks and meta-training, the composed model, the results,
and the settings refused at start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA

import methods.fedsplit.settings as fedsplit_settings
import methods.fedsplit.strategy
import tests.in_process as in_process
from client_app.local_update import round_seed
from client_app.node import Node
from methods.fedsplit.client_step import fedsplit_train
from methods.fedsplit.kmeans_selection import kmeans_plus_plus, select_metadata
from methods.fedsplit.meta_training import MetaTraining, compose, meta_train
from methods.fedsplit.strategy import COMPOSED_MODEL_FILE
from methods.registry import CATALOGUE, OBJECTIVES, for_run, parse_config
from models import build_model
from models.split_model import SplitModel
from protocol.messages import (
    ARRAYS,
    CONFIG,
    FEATURE_MAPS,
    FEATURE_METADATA,
    LEARNING_RATE,
    MAP_LABELS,
    METADATA_SECONDS,
    METRICS,
    SERVER_ROUND,
    TRAIN,
)
from run_config import ConfigError, build_model_for
from server_app.pretraining import initial_state
from server_app.run_errors import RunSetupError
from strategies.central_evaluation import CentralEvaluation
from tests.in_process import run_in_process, small_run_config


def fedsplit_config(tmp_path: Path, method: str = "fedsplit-kmeans", **overrides: Any) -> dict[str, Any]:
    """A small FedSplit run: LeNet-5 on the synthetic set, FedAvg's mean, no pretraining, few meta-epochs."""
    settings = {
        "pretrain": "none",
        "aggregation": "mean",
        "fedsplit.meta-epochs": 3,
        "fedsplit.n-com": 20,
        "fedsplit.k-means-clusters": 4,
    }
    return small_run_config(tmp_path, method=method, **{**settings, **overrides})


def client_round(tmp_path: Path, kmeans: bool, **overrides: Any) -> tuple[Node, SplitModel, RecordDict]:
    """Partition 0's FedSplit round on a freshly initialised global model: the node, the model sent, the reply."""
    # On the CPU, where ``maps_of`` recomputes the maps to compare them bit for bit.
    run_config = fedsplit_config(
        tmp_path, "fedsplit-kmeans" if kmeans else "fedsplit-all", **{"device": "cpu", **overrides}
    )
    context = Context(
        run_id=1,
        node_id=101,
        node_config={"partition-id": 0, "num-partitions": 4},
        state=RecordDict(),
        run_config=run_config,
    )
    node = Node(context, CATALOGUE, OBJECTIVES)
    model = build_model_for(node.config, seed=0)
    content = RecordDict(
        {ARRAYS: ArrayRecord(model.state_dict()), CONFIG: ConfigRecord({SERVER_ROUND: 1, LEARNING_RATE: 0.1})}
    )
    return node, model, fedsplit_train(node, Message(content, dst_node_id=101, message_type=TRAIN), kmeans=kmeans)


@torch.no_grad()
def maps_of(model: SplitModel, node: Node, level: str) -> torch.Tensor:
    model.eval()
    return model.forward_to(node.data().inputs(torch.device("cpu")), level)


def sent_rows(sent: torch.Tensor, maps: torch.Tensor) -> list[int]:
    """The index of each sent map among ``maps`` (each must be one of them, exactly)."""
    return [int(torch.nonzero((maps.flatten(1) == row.flatten()).all(dim=1))[0]) for row in sent]


def test_the_client_sends_the_real_maps_nearest_each_per_class_centroid_under_the_received_model(
    tmp_path: Path,
) -> None:
    node, model, reply = client_round(tmp_path, kmeans=True)
    record = reply[FEATURE_METADATA]
    sent = torch.from_numpy(record[FEATURE_MAPS].numpy())
    labels = torch.from_numpy(record[MAP_LABELS].numpy())
    received = maps_of(model, node, "low")
    rows = sent_rows(sent, received)  # original, unprojected maps of real local samples, under the *received* φ
    assert labels.tolist() == node.data().labels[rows].tolist()
    trained = build_model_for(node.config)
    trained.load_state_dict(reply[ARRAYS].to_torch_state_dict())
    assert not torch.equal(maps_of(trained, node, "low")[rows], sent)  # not the model the client trained
    # The client ran the selection kernel on those maps, with the round's seed and the configured n-com and K.
    seed, labels_held = round_seed(node.config.seed, 1, 0), node.data().labels
    assert rows == select_metadata(received, labels_held, n_com=20, clusters=4, seed=seed).indices.tolist()
    # On these very maps the kernel picks, per class, the member nearest each final K-means centroid, as
    # scikit-learn's PCA and Lloyd (from the same k-means++ seeds) find them. Checked in float64: on maps without
    # cluster structure float32 rounding can steer K-means to another, equally valid, clustering. A cluster of two
    # has both members equally near its centroid, up to rounding: either is right (which one the last bit picked
    # differed between CPU generations).
    flat = received.flatten(1).double().numpy()
    projected = PCA(n_components=20, svd_solver="full").fit_transform(flat)
    generator = torch.Generator().manual_seed(seed)
    nearest: list[set[int]] = []  # per cluster, its members nearest the centroid
    for label in sorted(set(labels_held.tolist())):
        members = np.flatnonzero(labels_held.numpy() == label)
        init = kmeans_plus_plus(torch.from_numpy(projected[members]), 4, generator).numpy()
        km = KMeans(n_clusters=4, init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(projected[members])
        for cluster in range(4):
            inside = members[km.labels_ == cluster]
            distances = np.linalg.norm(projected[inside] - km.cluster_centers_[cluster], axis=1)
            nearest.append(set(inside[distances <= distances.min() * (1 + 1e-9)].tolist()))
    chosen = set(select_metadata(received.double(), labels_held, n_com=20, clusters=4, seed=seed).indices.tolist())
    assert len(chosen) == len(nearest) == 12
    assert all(len(members & chosen) == 1 for members in nearest)  # one from each cluster, one of its nearest
    assert reply[METRICS][METADATA_SECONDS] > 0


def test_all_metadata_is_every_samples_map_and_a_class_smaller_than_the_clusters_sends_all(tmp_path: Path) -> None:
    node, model, reply = client_round(tmp_path / "all", kmeans=False, **{"common.metadata-level": "mid"})
    np.testing.assert_array_equal(reply[FEATURE_METADATA][FEATURE_MAPS].numpy(), maps_of(model, node, "mid").numpy())
    np.testing.assert_array_equal(reply[FEATURE_METADATA][MAP_LABELS].numpy(), node.data().labels.numpy())
    node, model, reply = client_round(tmp_path / "few", kmeans=True, **{"fedsplit.k-means-clusters": 10_000})
    assert sorted(
        sent_rows(torch.from_numpy(reply[FEATURE_METADATA][FEATURE_MAPS].numpy()), maps_of(model, node, "low"))
    ) == list(range(len(node.data())))


def test_meta_training_changes_only_theta_and_the_composed_model_takes_phi_from_the_global_model() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 1, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    upper = set(model.upper_state_keys("mid"))
    maps, labels = torch.randn(40, 32, 16, 16), torch.arange(40) % 4
    loss = meta_train(model, "mid", maps, labels, MetaTraining(2, 0.1, 8), torch.Generator().manual_seed(0))
    after = model.state_dict()
    assert np.isfinite(loss)
    assert all(torch.equal(before[k], after[k]) for k in before if k not in upper)  # φ: weights and BN statistics
    assert all(not torch.equal(before[k], after[k]) for k in upper if after[k].is_floating_point())
    global_model = build_model("wrn-10-1", 1, 4).state_dict()
    composed = compose(global_model, after, sorted(upper))
    assert list(composed) == list(global_model)
    assert all(composed[k] is (after[k] if k in upper else global_model[k]) for k in composed)


def rounds_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]


def test_fedsplit_is_fedavg_plus_a_composed_model_built_on_the_round_s_phi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts: list[dict[str, torch.Tensor]] = []  # θ as each round's meta-training receives it

    def spy(model: SplitModel, level: str, *args: Any) -> float:
        starts.append({k: v.clone() for k, v in model.state_dict().items() if k in model.upper_state_keys(level)})
        return meta_train(model, level, *args)

    monkeypatch.setattr(methods.fedsplit.strategy, "meta_train", spy)
    config = fedsplit_config(tmp_path / "split", **{"num-server-rounds": 2})
    run_in_process(config)
    monkeypatch.undo()
    # θ_meta is trained from scratch: both rounds start from the same θ_g^ini, not from round 1's θ_meta.
    assert len(starts) == 2 and all(torch.equal(starts[0][k], starts[1][k]) for k in starts[0])
    run_in_process(for_run({**config, "method": "fedavg", "results-dir": str(tmp_path / "avg" / "results")}))
    split, avg = tmp_path / "split" / "results" / "run", tmp_path / "avg" / "results" / "run"
    rounds, summary = rounds_of(split), json.loads((split / "summary.json").read_text())
    # The federated part is FedAvg exactly: the same global models, round by round.
    assert [r["accuracy"] for r in rounds] == [r["accuracy"] for r in rounds_of(avg)]
    final, fedavg_final = torch.load(split / "model.pt"), torch.load(avg / "model.pt")
    assert all(torch.equal(final[k], fedavg_final[k]) for k in final)
    # Each round reports the composed model and the metadata; the metadata's bytes are part of bytes_up.
    for r in rounds:
        assert 0 <= r["composed_accuracy"] <= 1 and r["meta_train_seconds"] > 0
        assert r["bytes_up"] == r["bytes_down"] + r["metadata_bytes"]  # θ up = θ down, plus the metadata
        assert r["metadata_map_bytes"] == r["metadata_maps"] * 6 * 14 * 14 * 4  # LeNet-5's low maps, float32
        assert r["metadata_bytes"] >= r["metadata_map_bytes"] + 8 * r["metadata_maps"]  # maps and int64 labels
        assert r["metadata_maps"] <= 4 * 4 * 4 and all(s["metadata_seconds"] > 0 for s in r["client_stats"])
    best = max(rounds, key=lambda r: r["composed_accuracy"])
    assert summary["best_composed_accuracy"] == best["composed_accuracy"]
    assert summary["final_composed_accuracy"] == rounds[-1]["composed_accuracy"]
    assert summary["total_metadata_bytes"] == sum(r["metadata_bytes"] for r in rounds)
    # composed_model.pt is the last round's {θ_meta, φ_g}: φ from the model that round sent, and its accuracy
    # is the one reported.
    composed, parsed = torch.load(split / COMPOSED_MODEL_FILE), parse_config(config)
    model = build_model_for(parsed)
    upper = set(model.upper_state_keys("low"))
    first_round = initial_state(parsed)
    assert not any(torch.equal(composed[k], final[k]) for k in upper if final[k].is_floating_point())
    _, accuracy = CentralEvaluation(parsed, {}, torch.device("cpu")).of_state(composed)
    assert accuracy == rounds[-1]["composed_accuracy"]
    one_round = fedsplit_config(tmp_path / "one", **{"num-server-rounds": 1})
    run_in_process(one_round)
    # Round 2's φ is that of the model round 2 sent (round 1's FedAvg result), not of the model round 2 produced.
    sent_in_round_2 = torch.load(tmp_path / "one" / "results" / "run" / "model.pt")
    assert all(torch.equal(composed[k], sent_in_round_2[k]) for k in composed if k not in upper)
    assert not all(torch.equal(composed[k], final[k]) for k in composed if k not in upper)
    composed = torch.load(tmp_path / "one" / "results" / "run" / COMPOSED_MODEL_FILE)
    assert all(torch.equal(composed[k], first_round[k]) for k in composed if k not in upper)
    assert not any(torch.equal(composed[k], first_round[k]) for k in upper if composed[k].is_floating_point())


def test_all_metadata_sends_every_samples_map_and_meta_every_trains_in_its_rounds_and_the_last(tmp_path: Path) -> None:
    overrides = {"num-server-rounds": 3, "common.metadata-level": "up", "fedsplit.meta-every": 2}
    run_in_process(fedsplit_config(tmp_path, "fedsplit-all", **overrides))
    rounds = rounds_of(tmp_path / "results" / "run")
    assert [r.get("composed_accuracy") is not None for r in rounds] == [False, True, True]
    assert all(r["metadata_bytes"] > r["num_examples"] * 84 * 4 and r["rejected"] == [] for r in rounds)
    for record in rounds[1:]:
        assert record["metadata_maps"] == record["num_examples"]
        assert record["metadata_map_bytes"] == record["num_examples"] * 84 * 4


def test_a_client_with_unsound_metadata_is_refused_whole_and_the_others_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = in_process.HANDLERS[TRAIN]

    def train(msg: Message, context: Context) -> Message:
        reply = honest(msg, context)
        if context.node_config["partition-id"] == 1:
            labels = reply.content[FEATURE_METADATA][MAP_LABELS].numpy()
            reply.content[FEATURE_METADATA][MAP_LABELS] = Array(labels + 10)
        return reply

    monkeypatch.setitem(in_process.HANDLERS, TRAIN, train)
    run_in_process(fedsplit_config(tmp_path, **{"num-server-rounds": 1}))
    (record,) = rounds_of(tmp_path / "results" / "run")
    assert [r["partition_id"] for r in record["rejected"]] == [1]
    assert "labels must be in [0, 4)" in record["rejected"][0]["reason"]
    assert sorted(s["partition_id"] for s in record["client_stats"]) == [0, 2, 3]
    assert record["composed_accuracy"] is not None and record["metadata_maps"] <= 3 * 4 * 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"common.metadata-level": "head"},
            "run config 'common.metadata-level' = 'head' is invalid: it must be one of 'low'",
        ),
        (
            {"common.metadata-level": "up", "fedsplit.n-com": 85},
            "run config 'fedsplit.n-com' = 85 is invalid: it is larger than the 84 values",
        ),
        ({"fedsplit.k-means-clusters": 0}, "run config 'fedsplit.k-means-clusters' = 0 is invalid: it must be > 0"),
    ],
)
def test_settings_that_cannot_fit_the_model_stop_the_run_at_start_naming_the_key(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(RunSetupError, match=message):
        run_in_process(fedsplit_config(tmp_path, **overrides))
    assert not (tmp_path / "results" / "run" / "rounds.jsonl").exists()


def test_a_level_the_model_lacks_is_refused_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class TwoLevels(SplitModel):
        def __init__(self) -> None:
            stages = {"low": torch.nn.Flatten(), "mid": torch.nn.Linear(1024, 8), "head": torch.nn.Linear(8, 4)}
            super().__init__(stages, levels=("low", "mid"))

    monkeypatch.setattr(fedsplit_settings, "build_model_for", lambda config: TwoLevels())
    with pytest.raises(ConfigError, match="'common.metadata-level' = 'up' is invalid: lenet5 splits at low, mid"):
        parse_config(fedsplit_config(tmp_path, "fedsplit-all", **{"common.metadata-level": "up"}))


def test_more_clusters_than_a_class_holds_is_no_error_each_such_class_sends_all(tmp_path: Path) -> None:
    run_in_process(fedsplit_config(tmp_path, **{"num-server-rounds": 1, "fedsplit.k-means-clusters": 10_000}))
    (record,) = rounds_of(tmp_path / "results" / "run")
    assert record["metadata_maps"] == record["num_examples"] and record["rejected"] == []
