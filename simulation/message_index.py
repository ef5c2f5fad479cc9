"""Flower's in-memory link state (the simulation engine's message store), with stored messages indexed by their
destination node, so that handing out messages costs what is in flight, not the population size.

Flower 1.41's simulation engine hands messages to the simulated nodes by calling ``get_message_ins(node_id, limit=1)``
for every node every 0.1 s, and each call walks every stored message, checking each (expiry, federation) on the
way: a sweep costs O(nodes × messages). Measured on the 2-core development machine: 0.07 s per sweep at 10,000
nodes and no message, 0.7 s with the 10 messages of a round in flight (a core kept busy, and the GIL taken from the
ServerApp that runs in the same process), and about 11 minutes per sweep with one query to each of 10,000 nodes.

``index_by_destination`` changes one state object, the one the ServerApp's grid and the engine share: its message
store becomes a dict that also keeps, per destination node, the ids of the messages stored for it, and its
``get_message_ins`` looks only at those: the same messages, in the same order, checked and marked delivered as
Flower does them. A node with nothing stored for it costs a dictionary lookup. Nothing changes outside simulation
(deployment's SuperLink runs in another process) or on another Flower version (the layout it relies on is checked
first, and left alone when it differs).
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import DEBUG
from typing import Any

import flwr
from flwr.common.logger import log

#: The Flower versions whose in-memory link state this was written against.
SUPPORTED_FLOWER = ("1.41.",)


class MessagesByDestination(dict):
    """A message store (message id -> message) that also keeps, per destination node, its messages' ids in the
    order they were stored."""

    def __init__(self, items: Iterable[tuple[str, Any]] = ()) -> None:
        super().__init__()
        self.destinations: dict[int, dict[str, None]] = {}
        for key, message in items:
            self[key] = message

    def _forget(self, key: str) -> None:
        node = dict.__getitem__(self, key).metadata.dst_node_id
        ids = self.destinations.get(node, {})
        ids.pop(key, None)
        if not ids:
            self.destinations.pop(node, None)

    def __setitem__(self, key: str, message: Any) -> None:
        if key in self:
            self._forget(key)
        super().__setitem__(key, message)
        self.destinations.setdefault(message.metadata.dst_node_id, {})[key] = None

    def __delitem__(self, key: str) -> None:
        self._forget(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self._forget(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def clear(self) -> None:
        self.destinations.clear()
        super().clear()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, message in dict(*args, **kwargs).items():
            self[key] = message

    def ids_for(self, node_id: int) -> list[str]:
        """The ids of the messages stored for ``node_id``, oldest first."""
        return list(self.destinations.get(node_id, ()))


def _indexable(state: Any) -> bool:
    needed = ("message_ins_store", "lock", "_check_stored_messages", "get_message_ins")
    return (
        type(state).__name__ == "InMemoryLinkState"
        and all(hasattr(state, name) for name in needed)
        and flwr.__version__.startswith(SUPPORTED_FLOWER)
    )


def index_by_destination(state: Any) -> bool:
    """Index ``state``'s stored messages by destination (see the module docstring); False, changing nothing, when
    ``state`` is not a Flower 1.41 in-memory link state. Idempotent."""
    if not _indexable(state):
        log(DEBUG, "message store left as it is: %s", type(state).__name__)
        return False
    from flwr.supercore.date import now

    with state.lock:
        if isinstance(state.message_ins_store, MessagesByDestination):
            return True
        store = MessagesByDestination(state.message_ins_store.items())
        state.message_ins_store = store

    def get_message_ins(node_id: int, limit: int | None, *, run_id: int | None = None) -> list[Any]:
        """Flower's ``InMemoryLinkState.get_message_ins``, reading only the messages stored for ``node_id``."""
        if limit is not None and limit < 1:
            raise AssertionError("`limit` must be >= 1")
        if node_id not in store.destinations:  # most nodes, most of the time
            return []
        found: list[Any] = []
        with state.lock:
            for message_id in store.ids_for(node_id):
                state._check_stored_messages({message_id})  # drops it if it expired, as Flower's scan does
                message = store.get(message_id)
                if (
                    message is not None
                    and (run_id is None or message.metadata.run_id == run_id)
                    and message.metadata.delivered_at == ""
                ):
                    found.append(message)
                if limit and len(found) == limit:
                    break
        delivered_at = now().isoformat()
        for message in found:
            message.metadata.delivered_at = delivered_at
        return found

    state.get_message_ins = get_message_ins
    return True
