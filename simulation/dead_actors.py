"""Stop a simulated run whose ClientApp actor died, instead of letting it finish on a broken engine.

When a Ray actor's process dies (the kernel killed it for want of memory, say), Flower 1.41's engine puts the dead
actor back into its pool. From then on it fails every message it is given, and fails it at once, so it is idle
again first and takes most of the messages. Measured (``benchmarks.memory_limit``, the 10-client WRN-16-1 case in
memory cgroups of 2.125 and 2.25 GiB): one actor killed in round 1 of 3, 9 of the 10 trainings failed in each later
round, and the runs still exited 0, at 24% and 13% accuracy where a sound run reaches 44%.

Such a run's results describe the failure, not the method, so the ServerApp stops it at the first reply that says an
actor died. The run is recorded as failed with the reason, and its last checkpoint resumes it (``resume = true``)
once the machine has room (fewer actors, a smaller cohort, more memory).

Only the simulation engine's own replies are read this way. The ServerApp wraps its grid in ``StopOnDeadActor`` only
when the grid is the simulation engine's in-memory one. A deployed SuperNode can put any text in an error reply, and
must not be able to stop a run with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import ERROR
from typing import Any

from flwr.app import Message
from flwr.common.constant import ErrorCode
from flwr.common.logger import log

from server_app.run_errors import RunError

#: How the engine words the error reply of a message whose actor died: ``str(type(ex)) + ":<'" + str(ex) + "'>"``.
DEAD_ACTOR_REASONS = ("<class 'ray.exceptions.ActorDiedError'>", "<class 'ray.exceptions.RayActorError'>")


class DeadActorError(RunError):
    """A simulated ClientApp's process died; the engine cannot run the rest of the run soundly."""


def dead_actor_reply(replies: Iterable[Message]) -> Message | None:
    """The first of ``replies`` that the engine sent because the actor running it had died; None if none did."""
    for reply in replies:
        if not reply.has_error():
            continue
        error = reply.error
        if error.code == ErrorCode.UNKNOWN and (error.reason or "").startswith(DEAD_ACTOR_REASONS):
            return reply
    return None


class StopOnDeadActor:
    """The simulation engine's grid, unchanged except that ``send_and_receive`` raises ``DeadActorError`` (logged
    first) when a reply says that a ClientApp actor died."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        dead = dead_actor_reply(replies)
        if dead is not None:
            node = dead.metadata.src_node_id
            message = (
                f"a simulated ClientApp's process died (Ray's ActorDiedError, answering node {node}), e.g. killed "
                "for want of memory. Flower's engine keeps the dead actor, and every message it gets from now on "
                "would fail, so the run stops here. Its last checkpoint resumes it (resume = true) with "
                "fewer actors, a smaller cohort or more memory"
            )
            log(ERROR, "%s", message)
            raise DeadActorError(message)
        return replies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
