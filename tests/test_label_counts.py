"""Label counts: the client's vector and its noise, the server's registry and its refusals (every rule of the
reply itself is in tests/test_protocol.py)."""

from __future__ import annotations

import numpy as np
import pytest

from client_app.label_counts import label_count_vector, privatise
from protocol.messages import LABEL_COUNTS
from protocol.replies import Identity
from strategies.label_counts import LabelCountRegistry
from tests.fake_grid import FakeGrid, client_responders

NODES = {10: 0, 20: 1, 30: 2, 40: 3}


def test_count_vector() -> None:
    assert label_count_vector(np.array([0, 2, 2, 3]), 5).tolist() == [1, 0, 2, 1, 0]


def test_laplace_noise_has_scale_one_over_epsilon() -> None:
    rng = np.random.default_rng(0)
    noise = np.concatenate([privatise(np.full(10, 1000.0), 0.5, rng) - 1000 for _ in range(20_000)])
    # Laplace(0, b), rounded: mean 0, variance 2b² + 1/12 with b = 1/ε = 2; whole numbers
    assert abs(noise.mean()) < 0.05
    assert noise.var() == pytest.approx(8.0 + 1 / 12, rel=0.03)
    assert (noise == np.round(noise)).all()
    assert privatise(np.ones(3), 0.0, rng).tolist() == [1.0, 1.0, 1.0]


def test_registry_asks_once_and_refuses_bad_vectors(caplog) -> None:
    counts = {0: [3, 0, 1], 1: [1, 2], 2: [-1.5, 4.2, 0.3], 3: [0, 0, 9]}
    grid = FakeGrid(NODES, client_responders(NODES, counts))
    registry = LabelCountRegistry(num_classes=3, noisy=True)
    identities = {pid: Identity(pid, 4, 100) for pid in range(4)}
    registry.collect(grid, {pid: node for node, pid in NODES.items()}, identities)
    assert set(registry.refused) == {1, 2}
    assert registry.usable([0, 1, 2, 3]) == [0, 3]
    assert "partition 1 sent unusable label counts (2 label counts for 3 labels)" in caplog.text
    registry.collect(grid, {pid: node for node, pid in NODES.items()}, identities)
    assert sum(m.metadata.message_type == LABEL_COUNTS for m in grid.sent) == 4  # nobody asked twice
    assert registry.as_json()["3"] == [0.0, 0.0, 9.0]
    assert registry.total([0, 3]).tolist() == [3.0, 0.0, 10.0]


def test_noisy_counts_are_whole_non_negative_numbers_drawn_from_the_os() -> None:
    """Two runs with one seed draw different noise (the seed cannot reproduce it); a release is rounded and
    clipped at zero."""
    counts = np.array([0.0, 3.0, 50.0, 7.0, 0.0, 1.0, 9.0, 2.0, 0.0, 4.0])
    first, second = privatise(counts, 0.1), privatise(counts, 0.1)
    assert not np.array_equal(first, second)
    assert (first >= 0).all() and (first == np.round(first)).all()


def test_a_client_releases_its_noisy_counts_once_per_run(tmp_path) -> None:
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    import client_app.app as client
    from run_config.defaults import load_defaults

    def ask(context: Context) -> list[float]:
        query = Message(RecordDict({"config": ConfigRecord({})}), dst_node_id=1, message_type=LABEL_COUNTS)
        return list(client.label_counts(query, context).content["label-counts"]["counts"])

    run_config = {**load_defaults(), "dataset": "synthetic", "label-dp-epsilon": 0.05}

    def new_run() -> Context:
        return Context(
            run_id=1,
            node_id=1,
            node_config={"partition-id": 0, "num-partitions": 2},
            state=RecordDict(),
            run_config=run_config,
        )

    run = new_run()
    assert ask(run) == ask(run)  # asked again within the run: the same release
    assert ask(run) != ask(new_run())  # another run, same seed: fresh noise


def test_without_dp_counts_must_add_up_to_what_the_client_holds() -> None:
    grid = FakeGrid({10: 0, 20: 1}, client_responders({10: 0, 20: 1}, {0: [1, 2, 3], 1: [4, 4, 4]}))
    registry = LabelCountRegistry(num_classes=3, noisy=False)
    registry.collect(grid, {0: 10, 1: 20}, {0: Identity(0, 2, 6), 1: Identity(1, 2, 100)})
    assert list(registry.counts) == [0]
    assert registry.refused == {1: "label counts add up to 12, but the client said it holds 100 samples"}
