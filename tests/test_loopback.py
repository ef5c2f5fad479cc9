"""deployment/loopback.py's wait: polled until the deadline, checked once more there, never sleeping past it."""

from __future__ import annotations

import time

import pytest

from deployment.loopback import wait_for


def test_a_wait_returns_the_first_true_value() -> None:
    replies = iter([None, 0, "", "ready", "later"])
    assert wait_for(lambda: next(replies), 10, "a reply", every=0.01) == "ready"


def test_a_wait_ends_at_its_deadline_not_at_the_next_poll() -> None:
    asked: list[float] = []
    start = time.monotonic()
    with pytest.raises(AssertionError, match="timed out after 0.3 s waiting for the node"):
        wait_for(lambda: asked.append(time.monotonic() - start), 0.3, "the node", every=5.0)
    assert len(asked) == 2 and asked[1] >= 0.3  # asked at the start and once more at the deadline
    assert time.monotonic() - start < 2.0  # not the 5 s poll


def test_a_value_that_comes_true_at_the_deadline_is_returned() -> None:
    deadline = time.monotonic() + 0.2
    assert wait_for(lambda: time.monotonic() >= deadline, 0.2, "the deadline", every=5.0) is True
