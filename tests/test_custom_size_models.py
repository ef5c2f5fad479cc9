"""Custom-size client models end to end (FedAT, FedKAD, FedMD): what each client receives, what the server steps
may change, the generic data, the checks at start, and every preset in one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

import methods.fedat.attention_transfer as fedat
from data.federated import _client_indices
from methods.common.client_models import architecture_of, parse_client_models
from methods.common.generic_data import GenericDataSettings, generic_positions, load_generic_data, parse_classes
from methods.registry import CATALOGUE, OBJECTIVES, for_run, parse_config
from models import build_model
from protocol.messages import (
    ARRAYS,
    CLASS_MAPS,
    CLASS_PRESENT,
    CLIENT_MODEL_RECORD,
    CONFIG,
    FEATURE_MAPS,
    MAP_LABELS,
    METADATA,
    MODEL_NAME,
    TRAIN,
)
from protocol.replies import Refused, read_client_model, read_metadata, read_prototypes
from run_config import ConfigError, federated_split
from server_app.checkpoint import CHECKPOINT_FILE
from server_app.run_errors import RunSetupError
from tests.in_process import ServerKilled, run_in_process, small_run_config

NUM_CLIENTS = 3
#: Client 0 trains a WRN-16-1, the others the global WRN-10-1 (a bigger client is fine and keeps the tests fast; for
#: FedAT it must start fresh: the global model lacks its second blocks).
CUSTOM = {
    "model": "wrn-10-1",
    "common.client-models": "0:wrn-16-1",
    "fedat.client-init": "fresh",
    "pretrain": "none",
    "public-fraction": 0.2,
    "common.generic-size": 24,
    "fedkad.generic-samples": 16,
    "num-server-rounds": 1,
    "common.client-eval-samples": 20,
    "eval-batch-size": 100,
    "common.server-batch-size": 16,
    "fedat.at-epochs": 1,
    "fedat.metadata-epochs": 1,
    "fedkad.kd-epochs": 1,
}
#: FedMD's tests: what they check (scores, resumed client models, transfer learning) holds for any architectures, and
#: LeNet-5 with a 2NN client runs them in seconds (the WRNs took a minute each).
SMALL_FEDMD = {"method": "fedmd", "model": "lenet5", "common.client-models": "0:mlp-2nn"}


def _config(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """A FedAT run unless ``overrides`` name another method; ``CUSTOM`` is shared by the three methods' runs, and
    each reads its own settings of it."""
    overrides = {"method": "fedat", **overrides}
    return for_run(small_run_config(tmp_path, **{**CUSTOM, **overrides}), keep=overrides)


def _rounds(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "results" / "run" / "rounds.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "results" / "run" / "summary.json").read_text())


def test_client_models_mapping() -> None:
    assert parse_client_models("0-5:wrn-10-1, 7:lenet5,*:wrn-16-1") == [
        (0, 5, "wrn-10-1"),
        (7, 7, "lenet5"),
        (-1, -1, "wrn-16-1"),
    ]
    config = parse_config(small_run_config(Path("/tmp"), method="fedat", **{"common.client-models": "1-2:wrn-22-1"}))
    assert [architecture_of(config, pid) for pid in range(4)] == ["lenet5", "wrn-22-1", "wrn-22-1", "lenet5"]
    for bad, why in [
        ("0:wrn-12-1", "not an architecture"),
        ("3-1:lenet5", "range"),
        ("0:lenet5,0:mlp-2nn", "more than once"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_client_models(bad)


def test_generic_data_never_reaches_a_client(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path, **{"common.generic-classes": "1,3", "common.generic-size": 30}))
    split = federated_split(config)
    generic = generic_positions(split, config.settings(GenericDataSettings))
    clients = np.concatenate([_client_indices(split, pid, NUM_CLIENTS, None) for pid in range(NUM_CLIENTS)])
    assert len(generic) == 30 and not set(generic) & set(clients)
    from data.loading import load_dataset

    assert set(load_dataset("synthetic").train.labels[generic]) <= {1, 3}
    assert parse_classes("") == () and parse_classes("1,2,9") == (1, 2, 9)


def test_generic_data_from_another_dataset_is_unlabelled_and_checked(tmp_path: Path) -> None:
    other = {
        "common.generic-source": "dataset",
        "common.generic-dataset": "fashion-mnist-mini",
        "common.generic-size": 40,
    }
    config = parse_config(_config(tmp_path, **other, **{"common.generic-classes": "8,9"}))
    generic = load_generic_data(federated_split(config), config.settings(GenericDataSettings))
    assert len(generic) == 40 and not generic.labelled and set(generic.labels.tolist()) <= {8, 9}
    assert tuple(generic.inputs.shape[1:]) == (1, 32, 32)  # padded to the models' input size
    for overrides, key in [
        ({"common.generic-dataset": "synthetic"}, "common.generic-dataset"),  # the clients' own dataset
        ({"common.generic-dataset": "cifar10"}, "common.generic-dataset"),  # 3 channels for a 1-channel task
        ({"common.generic-size": 10**6}, "common.generic-size"),
    ]:
        with pytest.raises(ConfigError, match=key):  # FedAT's start check, or the generic set's own
            bad = parse_config(_config(tmp_path, **{**other, **overrides}))
            generic_positions(federated_split(bad), bad.settings(GenericDataSettings))


def test_a_node_config_model_overrides_client_models(tmp_path: Path) -> None:
    from flwr.app import Context

    from client_app.node import Node
    from methods.common.own_model import answer_client_model

    run_config = _config(tmp_path, method="fedmd", **{"common.client-models": "0-1:wrn-16-1"})

    def answer(pid: int, **own: Any) -> str:
        node_config = {"partition-id": pid, "num-partitions": NUM_CLIENTS, **own}
        node = Node(
            Context(run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config=run_config),
            CATALOGUE,
            OBJECTIVES,
        )
        return str(
            answer_client_model(node, Message(RecordDict(), dst_node_id=1, message_type="query"))[CLIENT_MODEL_RECORD][
                MODEL_NAME
            ]
        )

    assert [answer(pid) for pid in range(NUM_CLIENTS)] == ["wrn-16-1", "wrn-16-1", "wrn-10-1"]
    assert answer(0, model="wrn-22-1") == "wrn-22-1" and answer(2, model="wrn-16-1") == "wrn-16-1"


def _run_recording(config: dict[str, Any]) -> list[Message]:
    """The training messages a whole run sent, in order."""
    grid = run_in_process(config, num_partitions=NUM_CLIENTS)
    return [m for m in grid.sent if m.metadata.message_type == TRAIN]


def _state_specs(name: str, channels: int = 1, classes: int = 4) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in build_model(name, channels, classes).state_dict().items()}


def test_fedat_end_to_end_each_client_receives_its_own_model_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[tuple[int, set[str], set[str]]] = []
    original = fedat.train_server_step

    def watched(model: Any, step: Any, level: str, *args: Any, **kwargs: Any) -> None:
        before = {k: v.clone() for k, v in model.state_dict().items()}
        original(model, step, level, *args, **kwargs)
        changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
        theta_weights = {k for k in model.upper_state_keys(level) if "running" not in k and "num_batches" not in k}
        steps.append((step, changed, theta_weights if step == 3 else set(model.upper_state_keys(level))))

    monkeypatch.setattr(fedat, "train_server_step", watched)
    sent = _run_recording(_config(tmp_path, method="fedat", **{"common.metadata-level": "mid"}))
    summary = _summary(tmp_path)
    assert summary["status"] == "completed" and summary["best_client_accuracy_mean"] is not None
    assert len(sent) == NUM_CLIENTS
    for msg in sent:
        pid = next(p for p, node in enumerate(range(101, 101 + NUM_CLIENTS)) if node == msg.metadata.dst_node_id)
        name = "wrn-16-1" if pid == 0 else "wrn-10-1"
        assert set(msg.content.keys()) == {ARRAYS, CONFIG}
        assert msg.content[CONFIG][MODEL_NAME] == name
        assert {k: tuple(a.shape) for k, a in msg.content[ARRAYS].items()} == _state_specs(name)
    # Bytes down are each client's own model, not the global model's size times the cohort.
    own_bytes = {
        n: sum(v.numel() * v.element_size() for v in build_model(n, 1, 4).state_dict().values())
        for n in ("wrn-16-1", "wrn-10-1")
    }
    expected_down = own_bytes["wrn-16-1"] + (NUM_CLIENTS - 1) * own_bytes["wrn-10-1"]
    # Per client: step 1 (all), 2 (θ only), 3 (φ only, θ's weights bitwise unchanged: only its BatchNorm statistics
    # follow φ's new maps); then one refinement per client.
    per_client = [steps[i : i + 3] for i in range(0, 3 * NUM_CLIENTS, 3)]
    for (s1, _, _), (s2, changed2, theta2), (s3, changed3, theta3) in per_client:
        assert (s1, s2, s3) == (1, 2, 3)
        assert changed2 and changed2 <= theta2
        assert changed3 and not changed3 & theta3
    assert [s for s, _, _ in steps[3 * NUM_CLIENTS :]] == [1] * NUM_CLIENTS
    record = _rounds(tmp_path)[0]
    assert expected_down <= record["bytes_down"] < expected_down + NUM_CLIENTS * 16 * 1024  # plus record overhead
    num_local = sum(s["num_local"] for s in record["client_stats"])
    map_bytes = 32 * 16 * 16 * 4 + 8  # a mid-level map of a WRN-d-1 (float32) and its int64 label
    assert record["metadata_bytes_up"] >= num_local * map_bytes  # every local sample's map travels
    assert record["bytes_up"] > record["metadata_bytes_up"]
    checkpoint = torch.load(tmp_path / "results" / "run" / CHECKPOINT_FILE, weights_only=False)
    kept = checkpoint["strategy"]
    assert kept["architecture"] == {"0": "wrn-16-1", "1": "wrn-10-1", "2": "wrn-10-1"}
    assert {k: tuple(v.shape) for k, v in kept["client_states"]["0"].items()} == _state_specs("wrn-16-1")


def test_fedat_clients_start_as_the_global_model_reduced_to_their_architecture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(
        tmp_path,
        method="fedat",
        model="wrn-16-1",
        **{"common.client-models": "0:wrn-10-1", "fedat.client-init": "global"},
    )
    sent = _run_recording(config)
    states = {
        msg.metadata.dst_node_id - 101: {k: torch.from_numpy(a.numpy()) for k, a in msg.content[ARRAYS].items()}
        for msg in sent
    }
    assert sorted(states) == list(range(NUM_CLIENTS))
    whole = states[1]  # partitions 1 and 2 train the global architecture: they start as the global model itself
    assert states[2].keys() == whole.keys() and all(torch.equal(states[2][k], whole[k]) for k in whole)
    assert set(states[0]) < set(whole)  # the WRN-10-1: the global WRN-16-1 without the second block of each group
    assert all(torch.equal(value, whole[key]) for key, value in states[0].items())
    assert _summary(tmp_path)["status"] == "completed"


@pytest.mark.parametrize(
    ("method", "overrides", "prototypes"),
    [
        ("fedkad", {}, True),
        # without prototypes, what runs holds for any architectures: LeNet-5 with a 2NN client, seconds, not the WRNs'
        ("fedmd", SMALL_FEDMD, False),
        ("fedkad", {**SMALL_FEDMD, "fedkad.prototype-regularisation": False}, False),
    ],
    ids=["fedkad", "fedmd", "fedkad-no-prototypes"],
)
def test_distillation_presets_end_to_end(
    tmp_path: Path, method: str, overrides: dict[str, Any], prototypes: bool
) -> None:
    config = _config(tmp_path, **{"common.client-init-epochs": 1, **overrides, "method": method})
    run_in_process(config, num_partitions=NUM_CLIENTS)
    assert _summary(tmp_path)["status"] == "completed"
    record = _rounds(tmp_path)[0]
    assert record["client_accuracy_mean"] is not None and len(record["client_accuracies"]) == NUM_CLIENTS
    if prototypes:
        values = NUM_CLIENTS * (4 * 64 * 8 * 8 * 4 + 4)  # C float32 maps and C flags per client
        assert values <= record["prototype_bytes_up"] < values + NUM_CLIENTS * 1024  # plus the records' own overhead
    else:
        assert "prototype_bytes_up" not in record


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"common.client-models": "0:wrn-11-1"}, "common.client-models"),
        ({"common.client-models": "0:lenet5"}, "common.client-models"),  # its maps cannot pair with the WRN's
        ({"common.generic-size": 5000}, "common.generic-size"),
        ({"common.generic-classes": "7"}, "common.generic-classes"),
        ({"fedat.client-init": "global"}, "fedat.client-init"),  # client 0's second blocks are not in the global model
        ({"model": "lenet5", "common.client-models": ""}, "fedat.at-levels"),  # LeNet-5 has C × H × W maps at low only
    ],
)
def test_bad_input_is_refused_at_start_naming_the_key(tmp_path: Path, overrides: dict[str, Any], match: str) -> None:
    with pytest.raises((RunSetupError, ConfigError), match=match):
        run_in_process(_config(tmp_path, method="fedat", **overrides), num_partitions=NUM_CLIENTS)
    assert not (tmp_path / "results" / "run" / "rounds.jsonl").exists() or not _rounds(tmp_path)


def test_fedkad_refuses_a_draw_larger_than_the_generic_set(tmp_path: Path) -> None:
    with pytest.raises(RunSetupError, match="fedkad.generic-samples"):
        run_in_process(
            _config(tmp_path, method="fedkad", **{"fedkad.generic-samples": 100}), num_partitions=NUM_CLIENTS
        )


def test_fedat_metadata_level_maps_must_match_the_global_theta() -> None:
    with pytest.raises(ValueError, match="common.metadata-level"):
        fedat.check_pairing(build_model("wrn-10-2", 1, 4), build_model("wrn-10-1", 1, 4), (1, 32, 32), "low")


def test_metadata_travels_as_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replies: list[Message] = []
    import tests.in_process as harness

    original = harness.HANDLERS[TRAIN]

    def keep(msg: Message, context: Any) -> Message:
        reply = original(msg, context)
        replies.append(reply)
        return reply

    monkeypatch.setitem(harness.HANDLERS, TRAIN, keep)
    run_in_process(_config(tmp_path, method="fedat", **{"fedat.metadata-fraction": 0.5}), num_partitions=NUM_CLIENTS)
    maps = replies[0].content[METADATA][FEATURE_MAPS]
    assert maps.shape[1:] == (16, 32, 32)  # level low
    assert _rounds(tmp_path)[0]["rejected"] == []


def test_a_killed_fedmd_run_resumes_with_its_client_models(tmp_path: Path) -> None:
    config = _config(tmp_path, **SMALL_FEDMD, **{"num-server-rounds": 2, "common.client-init-epochs": 1})
    run_in_process(config, num_partitions=NUM_CLIENTS)
    whole = _rounds(tmp_path)
    killed = {**config, "run-name": "killed"}
    with pytest.raises(ServerKilled):
        run_in_process(killed, num_partitions=NUM_CLIENTS, kill_at_round=2)
    run_in_process({**killed, "resume": True}, num_partitions=NUM_CLIENTS)
    resumed = [json.loads(line) for line in (tmp_path / "results" / "killed" / "rounds.jsonl").read_text().splitlines()]
    keys = ("accuracy", "client_accuracies", "bytes_down", "bytes_up")
    # Round 2 needs round 1's client models, and the clients initialised in round 1 are not initialised again.
    assert [{k: r[k] for k in keys} for r in resumed] == [{k: r[k] for k in keys} for r in whole]


def _metadata(maps: Any, labels: Any) -> ArrayRecord:
    return ArrayRecord({FEATURE_MAPS: torch.as_tensor(maps), MAP_LABELS: torch.as_tensor(labels)})


def test_metadata_replies_are_read_at_the_boundary() -> None:
    maps, labels = torch.zeros(3, 2, 4, 4), torch.tensor([0, 2, 2])
    counts = np.array([1, 0, 2])
    got_maps, got_labels = read_metadata(_metadata(maps, labels), 3, (2, 4, 4), 3, counts)
    assert got_maps.shape == (3, 2, 4, 4) and got_labels.tolist() == [0, 2, 2]
    for record, why in [
        (_metadata(torch.zeros(2, 2, 4, 4), labels[:2]), "shape"),
        (_metadata(torch.zeros(3, 2, 4, 2), labels), "shape"),
        (_metadata(maps.double(), labels), "dtype"),
        (_metadata(torch.full((3, 2, 4, 4), float("nan")), labels), "NaN"),
        (_metadata(maps, torch.tensor([0, 2, 3])), "lie in"),
        (_metadata(maps, torch.tensor([0, 0, 2])), "label counts"),
        (ArrayRecord({FEATURE_MAPS: maps}), "exactly"),
    ]:
        with pytest.raises(Refused, match=why):
            read_metadata(record, 3, (2, 4, 4), 3, counts)


def test_prototype_replies_are_read_at_the_boundary() -> None:
    maps = torch.zeros(3, 2, 2)
    maps[0], maps[2] = 1.0, 2.0
    present = torch.tensor([1, 0, 1], dtype=torch.uint8)
    counts = np.array([4, 0, 1])
    _, got = read_prototypes(ArrayRecord({CLASS_MAPS: maps, CLASS_PRESENT: present}), 3, (2, 2), counts)
    assert got.tolist() == [True, False, True]
    leaky = maps.clone()
    leaky[1] = 0.5
    for record, why in [
        (ArrayRecord({CLASS_MAPS: leaky, CLASS_PRESENT: present}), "not zero"),
        (ArrayRecord({CLASS_MAPS: maps, CLASS_PRESENT: torch.tensor([1, 1, 1], dtype=torch.uint8)}), "label counts"),
        (ArrayRecord({CLASS_MAPS: maps, CLASS_PRESENT: torch.tensor([1, 0, 2], dtype=torch.uint8)}), "0 or 1"),
        (ArrayRecord({CLASS_MAPS: maps[:2], CLASS_PRESENT: present}), "shape"),
    ]:
        with pytest.raises(Refused, match=why):
            read_prototypes(record, 3, (2, 2), counts)


def test_client_model_replies_name_a_usable_architecture() -> None:
    def usable(name: str) -> None:
        if name != "wrn-10-1":
            raise ValueError("cannot pair")

    reply = RecordDict({CLIENT_MODEL_RECORD: ConfigRecord({MODEL_NAME: "wrn-10-1"})})
    assert read_client_model(reply, usable) == "wrn-10-1"
    with pytest.raises(Refused, match="cannot pair"):
        read_client_model(RecordDict({CLIENT_MODEL_RECORD: ConfigRecord({MODEL_NAME: "wrn-16-1"})}), usable)
    with pytest.raises(Refused, match="not a string"):
        read_client_model(RecordDict({CLIENT_MODEL_RECORD: ConfigRecord({MODEL_NAME: 3})}), usable)


def _replies_and_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> tuple[list, list]:
    """Run FedMD recording every training message sent and every reply (in order)."""
    import tests.in_process as harness

    replies: list[Message] = []
    original = harness.HANDLERS[TRAIN]

    def keep(msg: Message, context: Any) -> Message:
        reply = original(msg, context)
        replies.append(reply)
        return reply

    monkeypatch.setitem(harness.HANDLERS, TRAIN, keep)
    sent = _run_recording(_config(tmp_path, **{**SMALL_FEDMD, **overrides}))
    return sent, replies


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(v, b[k]) for k, v in a.items())


def test_fedmd_clients_are_scored_after_their_own_training_and_a_client_alone_keeps_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fedkad.fedmd-digest = none: no client digests, so what a client receives next round is what it sent (trained
    # alone); the scores are those of the models as they arrived (FedMD (clients), after the Revisit).
    alone = {
        "fedkad.fedmd-digest": "none",
        "fedkad.fedmd-public-epochs": 0,
        "num-server-rounds": 2,
        "common.client-eval-samples": 20,
    }
    sent, replies = _replies_and_sent(tmp_path, monkeypatch, **alone)
    first, second = replies[:NUM_CLIENTS], sent[NUM_CLIENTS:]
    by_node = {r.metadata.src_node_id: r.content[ARRAYS].to_torch_state_dict() for r in first}
    for msg in second:
        assert _same(msg.content[ARRAYS].to_torch_state_dict(), by_node[msg.metadata.dst_node_id])
    record = _rounds(tmp_path)[0]
    assert "client_distilled_accuracy_mean" not in record and "kd_loss_last" in record  # the global model still distils
    # With the digest, the client models change between reply and next message, and both scores are reported.
    digest = tmp_path / "digest"
    sent, replies = _replies_and_sent(digest, monkeypatch, **{**alone, "fedkad.fedmd-digest": "reference"})
    by_node = {r.metadata.src_node_id: r.content[ARRAYS].to_torch_state_dict() for r in replies[:NUM_CLIENTS]}
    assert not any(
        _same(msg.content[ARRAYS].to_torch_state_dict(), by_node[msg.metadata.dst_node_id])
        for msg in sent[NUM_CLIENTS:]
    )
    record = _rounds(digest)[0]
    assert 0 <= record["client_accuracy_mean"] <= 1 and 0 <= record["client_distilled_accuracy_mean"] <= 1


def test_fedmd_transfer_learning_trains_each_first_model_on_the_labelled_public_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data.loading import load_dataset

    def first_models(folder: Path, epochs: int) -> list[dict[str, torch.Tensor]]:
        sent = _run_recording(_config(folder, **SMALL_FEDMD, **{"fedkad.fedmd-public-epochs": epochs}))
        return [msg.content[ARRAYS].to_torch_state_dict() for msg in sent]

    config = parse_config(_config(tmp_path, **SMALL_FEDMD))
    generic = load_generic_data(federated_split(config), config.settings(GenericDataSettings))
    assert generic.labelled and len(load_dataset("synthetic").train.labels) > len(generic)

    def public_loss(state: dict[str, torch.Tensor]) -> float:
        model = build_model(state_name(state), 1, 4)
        model.load_state_dict(state)
        return torch.nn.functional.cross_entropy(model.eval()(generic.inputs), generic.labels).item()

    fresh, transferred = first_models(tmp_path / "fresh", 0), first_models(tmp_path / "transfer", 20)
    assert all(public_loss(t) < 0.8 * public_loss(f) for f, t in zip(fresh, transferred)), [
        (public_loss(f), public_loss(t)) for f, t in zip(fresh, transferred)
    ]


def state_name(state: dict[str, torch.Tensor]) -> str:
    """The architecture (of SMALL_FEDMD's two) a state belongs to."""
    return "mlp-2nn" if state.keys() == build_model("mlp-2nn", 1, 4).state_dict().keys() else "lenet5"


def test_fedmd_transfer_learning_needs_labelled_public_data(tmp_path: Path) -> None:
    other = {
        "common.generic-source": "dataset",
        "common.generic-dataset": "fashion-mnist-mini",
        "common.generic-size": 24,
    }
    with pytest.raises(RunSetupError, match="fedkad.fedmd-public-epochs"):
        run_in_process(_config(tmp_path, method="fedmd", **other), num_partitions=NUM_CLIENTS)
    run_in_process(_config(tmp_path, method="fedmd", **other, **{"fedkad.fedmd-public-epochs": 0}), NUM_CLIENTS)
    assert _summary(tmp_path)["status"] == "completed"


@pytest.mark.parametrize("method", ["fedkad", "fedmd"])
def test_the_defaults_fit_the_default_dataset(method: str) -> None:
    from methods.fedkad.method import check_kd_run
    from run_config.defaults import load_defaults

    config = parse_config({**load_defaults(), "method": method})
    assert config.dataset == "fashion-mnist-mini" and config.public_fraction == 0.2
    check_kd_run(config, 10)  # D_g of generic-size images fits the held-out share, the draw fits D_g
