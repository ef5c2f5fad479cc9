"""Queries to many clients sent a batch at a time, so that what is in flight stays bounded however many clients
there are (10,000 at the start of a large simulation): Flower checks every message in flight each time the server
polls for replies, so one send of 10,000 queries costs far more than twenty sends of 500."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flwr.app import Message

#: Queries in flight at once.
QUERY_BATCH = 500


def send_in_batches(grid: Any, messages: Sequence[Message], timeout: float) -> list[Message]:
    """The replies to ``messages``, sent ``QUERY_BATCH`` at a time (each batch waits at most ``timeout`` seconds)."""
    batch = QUERY_BATCH
    replies: list[Message] = []
    for start in range(0, len(messages), batch):
        replies.extend(grid.send_and_receive(messages[start : start + batch], timeout=timeout))
    return replies
