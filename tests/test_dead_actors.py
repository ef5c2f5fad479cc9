"""A simulated run stops when a ClientApp actor died (``simulation/dead_actors.py``), and only then."""

from __future__ import annotations

import pytest
from flwr.app import Error, Message, RecordDict
from flwr.common.constant import ErrorCode

import tests.fake_grid  # noqa: F401  (stamps messages with a task identity)
from server_app.run_errors import RunError
from simulation.dead_actors import DeadActorError, StopOnDeadActor, dead_actor_reply, guard_if_simulated

#: What Flower 1.41's engine puts in the error reply of a message whose actor died.
DIED = (
    "<class 'ray.exceptions.ActorDiedError'>:<'The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: ClientAppActor\n\tactor_id: 33f3dbf8\n\tpid: 20606'>"
)


def _query(node_id: int) -> Message:
    return Message(RecordDict(), dst_node_id=node_id, message_type="query.identify")


def _error(node_id: int, code: int, reason: str) -> Message:
    return Message(Error(code=code, reason=reason), reply_to=_query(node_id))


def _answer(node_id: int) -> Message:
    return Message(RecordDict(), reply_to=_query(node_id))


def test_a_reply_from_a_dead_actor_is_found_among_sound_and_failed_ones() -> None:
    raised = _error(2, ErrorCode.CLIENT_APP_RAISED_EXCEPTION, "<class 'ValueError'>:<'bad'>")
    dead = _error(3, ErrorCode.UNKNOWN, DIED)
    assert dead_actor_reply([_answer(1), raised, dead]) is dead
    assert dead_actor_reply([_answer(1), raised]) is None


def test_a_client_exception_that_names_the_error_is_not_a_dead_actor() -> None:
    """A ClientApp's own exception comes with its own code; its text, whatever it says, is not the engine's."""
    assert dead_actor_reply([_error(2, ErrorCode.CLIENT_APP_RAISED_EXCEPTION, DIED)]) is None
    assert dead_actor_reply([_error(2, ErrorCode.UNKNOWN, "ActorDiedError: " + DIED)]) is None


class _Grid:
    def __init__(self, replies: list[Message]) -> None:
        self.replies = replies

    def send_and_receive(self, messages, *, timeout=None):
        return iter(self.replies)

    def get_node_ids(self) -> list[int]:
        return [1, 2, 3]


def test_the_guarded_grid_passes_replies_through_and_stops_on_a_dead_actor(caplog: pytest.LogCaptureFixture) -> None:
    sound = [_answer(1), _error(2, ErrorCode.CLIENT_APP_RAISED_EXCEPTION, "<class 'ValueError'>:<'bad'>")]
    assert StopOnDeadActor(_Grid(sound)).send_and_receive([]) == sound
    assert StopOnDeadActor(_Grid(sound)).get_node_ids() == [1, 2, 3]
    with pytest.raises(DeadActorError, match="ClientApp's process died .* answering node 3") as raised:
        StopOnDeadActor(_Grid([*sound, _error(3, ErrorCode.UNKNOWN, DIED)])).send_and_receive([])
    assert isinstance(raised.value, RunError)  # logged once, shown without a traceback, recorded as failed
    assert "resume = true" in caplog.text


def test_the_message_names_the_ray_error_that_matched() -> None:
    reason = "<class 'ray.exceptions.RayActorError'>:<'The actor died'>"
    with pytest.raises(DeadActorError, match="Ray's RayActorError, answering node 4"):
        StopOnDeadActor(_Grid([_error(4, ErrorCode.UNKNOWN, reason)])).send_and_receive([])


def test_only_the_simulation_engines_grid_is_guarded() -> None:
    """A deployed SuperLink's grid is left as it is: a node's error reply, whatever its text, cannot stop the run."""
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    deployed = _Grid([_error(3, ErrorCode.UNKNOWN, DIED)])
    assert guard_if_simulated(deployed) is deployed
    assert [r.error.reason for r in deployed.send_and_receive([])] == [DIED]
    simulated = InMemoryGrid.__new__(InMemoryGrid)  # the engine's grid, without a link state behind it
    assert isinstance(guard_if_simulated(simulated), StopOnDeadActor)
