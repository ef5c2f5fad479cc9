"""A computation run in a background thread while the ServerApp waits for something else (its clients).

The thread never hides a failure nor keeps a failed ServerApp alive: what ``compute`` raises is raised again by
``result()`` (and by ``check()``, which the waiting side polls so that a failure ends the wait at once); the thread is
a daemon (it never keeps the process alive), and ``cancel()`` asks ``compute`` to stop through the event it is given,
which a long computation checks between its steps (pretraining does, at every mini-batch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """Raised by a background computation that saw its stop event set."""


class Background(Generic[T]):
    """``compute(stop)`` started at once in a daemon thread; ``result()`` waits for it and returns its value, or raises
    what it raised."""

    def __init__(self, compute: Callable[[threading.Event], T], name: str) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._stop = threading.Event()

        def run() -> None:
            try:
                self._value = compute(self._stop)
            except BaseException as err:  # handed to whoever waits for the result
                self._error = err

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def check(self) -> None:
        """Raise now what ``compute`` raised, if it has already failed (without waiting for it)."""
        if self.done() and self._error is not None:
            raise self._error

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def cancel(self, wait: float = 0.0) -> None:
        """Ask ``compute`` to stop (a no-op once it is done); wait up to ``wait`` seconds for it to end."""
        self._stop.set()
        if wait > 0:
            self._thread.join(wait)
