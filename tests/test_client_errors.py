"""error_summary: the root cause of a client's error, in one line."""

from __future__ import annotations

from pathlib import Path

from strategies.client_errors import MAX_CHARS, error_summary

# The reason Flower 1.41's Ray backend gave for a ClientApp raising InjectedFault (recorded from a run).
RAY_REASON = (Path(__file__).parent / "ray_error_reason.txt").read_text()


def test_ray_traceback_becomes_its_root_cause() -> None:
    assert "\x1b[" in RAY_REASON and len(RAY_REASON) > 1000
    assert error_summary(RAY_REASON) == "InjectedFault: fail-partitions: this client is set to raise"


def test_plain_reasons_keep_their_first_line() -> None:
    assert error_summary("ValueError: bad labels") == "ValueError: bad labels"
    assert error_summary("\nnode went away\nmore") == "node went away"
    assert len(error_summary("x" * 5000)) == MAX_CHARS


def test_a_deployed_supernodes_reason_becomes_name_and_message() -> None:
    reason = "<class 'data.node_data.NodeDataError'>:<'node config 'data-path' = '/x' is not a folder on this node'>"
    assert error_summary(reason) == "NodeDataError: node config 'data-path' = '/x' is not a folder on this node"
