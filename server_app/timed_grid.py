"""The ServerApp's grid, with each exchange of messages timed for a profile (``profiling.spans``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flwr.app import Message

from profiling.spans import EXCHANGE, span


class TimedGrid:
    """Flower's grid unchanged, except that ``send_and_receive`` (push, then wait for the replies) is a span."""

    def __init__(self, grid: Any) -> None:
        self._grid = grid

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        messages = list(messages)
        with span(EXCHANGE, messages=len(messages)):
            return list(self._grid.send_and_receive(messages, timeout=timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
