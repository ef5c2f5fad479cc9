"""The ClientApp holds no client data in memory until the client is first selected for training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import client_app.node as node_module
from methods.registry import CATALOGUE, OBJECTIVES
from tests.in_process import run_in_process, small_run_config


def test_only_selected_clients_load_their_data_while_all_send_label_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[int] = []
    load = node_module.load_local_data

    def recording_load(split, partition_id: int, num_partitions: int, cache=None):
        loaded.append(partition_id)
        return load(split, partition_id, num_partitions, cache)

    monkeypatch.setattr(node_module, "load_local_data", recording_load)
    run_in_process(small_run_config(tmp_path, **{"fraction-train": 0.25, "num-server-rounds": 1}), num_partitions=8)
    run = tmp_path / "results" / "run"
    trained = json.loads((run / "rounds.jsonl").read_text().splitlines()[0])["clients"]
    assert len(trained) == 2 and sorted(set(loaded)) == sorted(trained)
    counts = json.loads((run / "label_counts.json").read_text())
    assert sorted(counts, key=int) == [str(pid) for pid in range(8)]


def test_a_node_sets_its_own_hardware_settings_and_bad_ones_name_the_key() -> None:
    from flwr.app import Context, RecordDict

    from run_config.defaults import load_defaults

    def context(**node: object) -> Context:
        return Context(
            run_id=1,
            node_id=1,
            node_config={"partition-id": 0, "num-partitions": 2, **node},
            state=RecordDict(),
            run_config=load_defaults(),
        )

    plain = node_module.node_config(context(), CATALOGUE)
    own = node_module.node_config(
        context(**{"feature-cache-mb": 16, "eval-batch-size": 64, "device": "cpu"}), CATALOGUE
    )
    assert (plain.feature_cache_mb, plain.eval_batch_size) == (2048, 64)
    assert (own.feature_cache_mb, own.eval_batch_size, own.device) == (16, 64, "cpu")
    assert own.temperature == plain.temperature and own.freeze == plain.freeze == "mid"
    with pytest.raises(ValueError, match=r"node config: run config 'feature-cache-mb' = 0 is invalid"):
        node_module.node_config(context(**{"feature-cache-mb": 0}), CATALOGUE)
    with pytest.raises(ValueError, match=r"node config 'device' = 'cuda:3' but this node has no such device"):
        _ = node_module.Node(context(device="cuda:3"), CATALOGUE, OBJECTIVES).device


def test_clients_send_their_label_counts_with_their_identity_so_the_start_is_one_query_each(tmp_path: Path) -> None:
    from protocol.messages import IDENTIFY, LABEL_COUNTS

    grid = run_in_process(small_run_config(tmp_path, **{"num-server-rounds": 1}), num_partitions=4)
    kinds = [m.metadata.message_type for m in grid.sent]
    assert kinds.count(IDENTIFY) == 4 and LABEL_COUNTS not in kinds
    counts = json.loads((tmp_path / "results" / "run" / "label_counts.json").read_text())
    assert sorted(counts, key=int) == ["0", "1", "2", "3"]
