"""Replace a file all at once: a reader, or a run killed mid-write, sees the old file or the new one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def replace_file(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Let ``write`` fill a temporary file beside ``path``, flush it to disk, then rename it over ``path``.

    If ``write`` fails, ``path`` is left as it was and the temporary file is removed. The temporary file's name holds
    the process id, so processes writing the same file at once (two runs filling one cache entry) never write into
    each other's."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def replace_text(path: Path, text: str) -> None:
    """``replace_file`` for UTF-8 text."""
    replace_file(path, lambda handle: handle.write(text.encode()))
