"""Errors that end a run after saying why in one log line, and Flower's log without their tracebacks.

Flower logs any exception the ServerApp raises with its traceback. For a run that cannot start (a bad setting, a
missing dataset) or that trained nothing, the ServerApp has already logged the reason in one line, so twenty lines of
traceback only hide it: ``hide_tracebacks_of`` strips the traceback from Flower's report of these errors alone.
"""

from __future__ import annotations

import logging

FLOWER_LOGGER = "flwr"


class RunError(RuntimeError):
    """The run stops; its message says why and has been logged already."""


class RunSetupError(RunError):
    """The run cannot start; the message says why."""


class RunStopped(RunError):
    """The run was stopped (a signal) and its summary says so; it must not go on."""


class RunFailedError(RunError):
    """The run ended without training anything (no round aggregated an update)."""


class _WithoutTracebackOf(logging.Filter):
    def __init__(self, error_type: type[BaseException]) -> None:
        super().__init__()
        self.error_type = error_type

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.error_type):
            record.exc_info, record.exc_text = None, None
        return True


def hide_tracebacks_of(error_type: type[BaseException] = RunError) -> None:
    """Make Flower's logger print ``error_type`` exceptions without their traceback (once per process)."""
    logger = logging.getLogger(FLOWER_LOGGER)
    if not any(isinstance(f, _WithoutTracebackOf) and f.error_type is error_type for f in logger.filters):
        logger.addFilter(_WithoutTracebackOf(error_type))
