"""The ClientApp holds no client data in memory until the client is first selected for training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import client_app.app as client
from tests.in_process import run_in_process, small_run_config


def test_only_selected_clients_load_their_data_while_all_send_label_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[int] = []
    load = client.load_local_data

    def recording_load(split, partition_id: int, num_partitions: int):
        loaded.append(partition_id)
        return load(split, partition_id, num_partitions)

    monkeypatch.setattr(client, "load_local_data", recording_load)
    run_in_process(small_run_config(tmp_path, **{"fraction-train": 0.25, "num-server-rounds": 1}), num_partitions=8)
    run = tmp_path / "results" / "run"
    trained = json.loads((run / "rounds.jsonl").read_text().splitlines()[0])["clients"]
    assert len(trained) == 2 and sorted(set(loaded)) == sorted(trained)
    counts = json.loads((run / "label_counts.json").read_text())
    assert sorted(counts, key=int) == [str(pid) for pid in range(8)]
