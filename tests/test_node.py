"""client_app/node.py: the global model a training message gives a node, from θ it carries and the φ the node holds."""

from __future__ import annotations

import pytest
import torch
from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

import client_app.node as node_module
from client_app.node import DecodedFrozenParts, MissingFrozenPartError, Node
from methods.registry import CATALOGUE, OBJECTIVES
from protocol.messages import ARRAYS, FROZEN, TRAIN
from run_config import build_model_for
from run_config.defaults import load_defaults
from strategies.partial_model import split_state

# a message is made inside a run (as in tests/fake_grid.py)
TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1


def a_node(partition_id: int) -> Node:
    context = Context(
        run_id=1,
        node_id=partition_id + 1,
        node_config={"partition-id": partition_id, "num-partitions": 4},
        state=RecordDict(),
        run_config={**load_defaults(), "model": "lenet5", "freeze": "mid"},
    )
    return Node(context, CATALOGUE, OBJECTIVES)


def a_message(theta: dict[str, torch.Tensor], phi: dict[str, torch.Tensor] | None) -> Message:
    content = RecordDict({ARRAYS: ArrayRecord(theta)})
    if phi is not None:
        content[FROZEN] = ArrayRecord(phi)
    return Message(content, dst_node_id=1, message_type=TRAIN)


def a_model_state(seed: int, node: Node) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    model = build_model_for(node.config, seed=seed)
    return split_state(model.state_dict(), model.upper_state_keys(node.config.freeze))


def test_a_node_builds_phi_it_holds_and_theta_it_receives_and_decodes_phi_once_for_every_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded = DecodedFrozenParts()
    monkeypatch.setattr(node_module, "DECODED_FROZEN", decoded)
    calls: list[int] = []
    real = ArrayRecord.to_torch_state_dict

    def counted(record: ArrayRecord, keep_input: bool = True) -> dict[str, torch.Tensor]:
        calls.append(1)
        return real(record, keep_input=keep_input)

    monkeypatch.setattr(ArrayRecord, "to_torch_state_dict", counted)
    nodes = [a_node(0), a_node(1)]
    phi, theta = a_model_state(0, nodes[0])
    for node in nodes:  # φ arrives once, with round 1's θ
        node.global_model(a_message(theta, phi))
    for round_theta in (a_model_state(1, nodes[0])[1], a_model_state(2, nodes[0])[1]):
        for node in nodes:  # later rounds: θ alone
            model, fingerprint = node.global_model(a_message(round_theta, None))
            state = model.state_dict()
            assert fingerprint and all(torch.equal(state[k], v) for k, v in phi.items())
            assert all(torch.equal(state[k], v) for k, v in round_theta.items())
    # each arriving φ decoded once, for its fingerprint and the cache (2), each message's θ (2 + 4); the held φ is
    # never decoded again, for either node in any round
    assert len(calls) == 2 + 6


def test_a_new_phi_is_decoded_again_not_taken_from_the_old_one() -> None:
    node = a_node(0)
    first_phi, theta = a_model_state(0, node)
    node.global_model(a_message(theta, first_phi))
    node.global_model(a_message(theta, None))
    second_phi = a_model_state(5, node)[0]
    node.global_model(a_message(theta, second_phi))
    model, _ = node.global_model(a_message(theta, None))
    assert all(torch.equal(model.state_dict()[k], v) for k, v in second_phi.items())
    assert not all(torch.equal(second_phi[k], first_phi[k]) for k in first_phi)


def test_theta_without_a_held_phi_asks_for_phi() -> None:
    node = a_node(0)
    _, theta = a_model_state(0, node)
    with pytest.raises(MissingFrozenPartError):
        node.global_model(a_message(theta, None))
