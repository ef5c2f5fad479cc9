"""Stop a simulated run whose ClientApp actor died, instead of letting it finish on a broken engine.

When a Ray actor's process dies (the kernel killed it for want of memory, say), Flower 1.41's engine puts the dead
actor back into its pool. From then on it fails every message it is given, and fails it at once, so it is idle
again first and takes most of the messages. Measured (``python -m benchmarks memory-limit``, the 10-client WRN-16-1
case in memory cgroups of 2.125 and 2.25 GiB): one actor killed in round 1 of 3, 9 of the 10 trainings failed in each
later round, and the runs still exited 0, at 24% and 13% accuracy where a sound run reaches 44%.

Such a run's results describe the failure, not the method, so the ServerApp stops it at the first reply that says an
actor died. Once its rounds have started, the run is recorded as failed with the reason (summary.json); if a round
had finished, ``resume = true`` goes on from its checkpoint once the machine has room (fewer actors, more memory).

Only the simulation engine's own replies are read this way: ``guard_if_simulated`` wraps the grid only when it is the
simulation engine's in-memory one. A deployed SuperNode can put any text in an error reply, and must not be able to
stop a run with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import ERROR
from typing import Any

from flwr.app import Message
from flwr.common.constant import ErrorCode
from flwr.common.logger import log
from flwr.superlink.grid.inmemory_grid import InMemoryGrid

from server_app.run_errors import RunError

#: How the engine words the error reply of a message whose actor died: ``str(type(ex)) + ":<'" + str(ex) + "'>"``;
#: Ray's exception class -> its name.
DEAD_ACTOR_REASONS = {
    "<class 'ray.exceptions.ActorDiedError'>": "ActorDiedError",
    "<class 'ray.exceptions.RayActorError'>": "RayActorError",
}


class DeadActorError(RunError):
    """A simulated ClientApp's process died; the engine cannot run the rest of the run soundly."""


def ray_actor_error(reply: Message) -> str | None:
    """The name of Ray's error when the engine sent ``reply`` because the actor running it had died; else None."""
    if not reply.has_error() or reply.error.code != ErrorCode.UNKNOWN:
        return None
    reason = reply.error.reason or ""
    return next((name for text, name in DEAD_ACTOR_REASONS.items() if reason.startswith(text)), None)


def dead_actor_reply(replies: Iterable[Message]) -> Message | None:
    """The first of ``replies`` that the engine sent because the actor running it had died; None if none did."""
    return next((reply for reply in replies if ray_actor_error(reply) is not None), None)


class StopOnDeadActor:
    """The simulation engine's grid, unchanged except that ``send_and_receive`` raises ``DeadActorError`` (logged
    first) when a reply says that a ClientApp actor died."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        dead = dead_actor_reply(replies)
        if dead is not None:
            message = (
                f"a simulated ClientApp's process died (Ray's {ray_actor_error(dead)}, answering node "
                f"{dead.metadata.src_node_id}), e.g. killed for want of memory. Flower's engine keeps the dead "
                "actor, and every message it gets from now on would fail, so the run stops here. If a round had "
                "finished, resume = true goes on from its checkpoint, with fewer actors or more memory"
            )
            log(ERROR, "%s", message)
            raise DeadActorError(message)
        return replies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)


def guard_if_simulated(grid: Any) -> Any:
    """``grid`` wrapped in ``StopOnDeadActor`` when it is the simulation engine's (Flower's ``InMemoryGrid``);
    any other grid (a deployed SuperLink's) unchanged."""
    return StopOnDeadActor(grid) if isinstance(grid, InMemoryGrid) else grid
