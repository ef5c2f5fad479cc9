"""One run at a time per run folder: ``<results-dir>/<run-name>/.lock`` is locked while a run writes there.

The lock is ``fcntl.flock`` (POSIX) on that file. The kernel drops it when the process holding it ends,
however it ends (``kill -9`` included), so a crashed run leaves no stale lock and a restart with
``resume = true`` may go on at once; within one process ``RunLock.release`` drops it. The file stays when
the lock is dropped (removing it would race with a run opening it) and holds the PID of the run that
locked it last, for the refusal message.

Before locking, the run folder is checked to resolve, symlinks followed, to a folder strictly inside
``results-dir``; a run folder holding an earlier run's files is refused unless the run resumes.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from server_app.checkpoint import CHECKPOINT_FILE
from server_app.results import CONFIG_FILE, MODEL_FILE, ROUNDS_FILE, SUMMARY_FILE

LOCK_FILE = ".lock"
#: Files whose presence shows that a run has written the folder before.
EARLIER_RUN_FILES = (CONFIG_FILE, ROUNDS_FILE, CHECKPOINT_FILE, SUMMARY_FILE, MODEL_FILE)


class RunFolderError(RuntimeError):
    """The run folder lies outside results-dir, another run holds it, or it holds an earlier run."""


class RunLock:
    """The exclusive lock on a run folder; ``release`` (or the end of a ``with`` block) drops it."""

    def __init__(self, directory: Path, descriptor: int) -> None:
        self.directory = directory
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock); calling it again does nothing."""
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()


def check_inside(directory: Path, results_dir: Path) -> None:
    """RunFolderError unless ``directory``, symlinks resolved, lies strictly inside ``results_dir``."""
    root, resolved = results_dir.expanduser().resolve(), directory.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise RunFolderError(
            f"run folder {directory} resolves to {resolved}, which is not inside results-dir {root}; "
            "remove the link or choose another run-name"
        )


def holds_earlier_run(directory: Path) -> bool:
    """Whether a run has written results or a checkpoint into ``directory``."""
    return any((directory / name).exists() for name in EARLIER_RUN_FILES)


def _holder(descriptor: int) -> str:
    """`` (process <pid>)`` as the lock file records the run holding it, or empty."""
    recorded = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
    return f" (process {recorded})" if recorded.isdigit() else ""


def _open_lock_file(directory: Path) -> int:
    """A descriptor of ``<directory>/.lock``, created if missing; a symlink in its place is refused."""
    try:
        return os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise RunFolderError(
            f"run folder {directory} cannot be locked: {err.strerror} ({directory / LOCK_FILE})"
        ) from None


def remove_if_unused(directory: Path) -> None:
    """Remove a run folder that holds nothing but its lock file: a run refused at start (else every refused attempt
    with an automatic run-name would leave an empty folder behind)."""
    try:
        if [entry.name for entry in directory.iterdir()] != [LOCK_FILE]:
            return
        (directory / LOCK_FILE).unlink()
        directory.rmdir()
    except OSError:  # gone already, or another run began writing it meanwhile
        pass


def lock_run_folder(directory: Path, results_dir: str | Path, resume: bool, resumable: bool = True) -> RunLock:
    """Create ``directory`` and lock it for this run; RunFolderError, one line naming the folder, if it resolves
    outside ``results_dir``, another run holds it, or it holds an earlier run and ``resume`` is off (the message
    suggests ``resume = true`` when the caller is ``resumable``)."""
    check_inside(directory, Path(results_dir))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunFolderError(f"run folder {directory} cannot be created: {err.strerror}") from None
    descriptor = _open_lock_file(directory)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(descriptor)
        os.close(descriptor)
        raise RunFolderError(
            f"run folder {directory} is in use by another run{holder}; wait for it to end or choose another run-name"
        ) from None
    if not resume and holds_earlier_run(directory):
        os.close(descriptor)
        resuming = "set resume = true to go on from its checkpoint, or " if resumable else ""
        raise RunFolderError(
            f"run folder {directory} holds an earlier run; {resuming}choose another run-name (or remove the folder)"
        )
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return RunLock(directory, descriptor)
