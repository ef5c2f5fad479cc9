"""Arrays computed once per machine and shared by its processes: a folder of ``.npy`` files, memory-mapped.

In simulation every ClientApp actor and the ServerApp need the same decoded dataset and the same split over the
clients. Computed in each process, they cost each process the decoding and flwr-datasets' partitioning (seconds) and
a private copy of the images. Here the first process to need them builds them under a file lock (``fcntl.flock``,
so the others wait instead of repeating the work), writes them to a folder named by a digest of what determines
them, and every process maps the files read-only-shared (copy-on-write): their pages sit once in the page cache,
whatever the number of processes.

An entry is written to a temporary folder and renamed into place, so a reader never sees half of one; a stale
temporary folder left by a killed process is ignored. Entries never change once written (their name is a digest of
everything that went into them), so the folder may be deleted at any time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]
#: Written last into an entry's folder: the entry is whole.
_COMPLETE = "complete.json"


def entry_name(key: Mapping[str, Any]) -> str:
    """The folder name of the entry for ``key`` (a JSON-serialisable description of what the arrays hold)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # drops the lock


def _read(entry: Path) -> Arrays | None:
    """The entry's arrays memory-mapped, or None when it is not (wholly) there."""
    try:
        names = json.loads((entry / _COMPLETE).read_text())["arrays"]
        return {name: np.load(entry / f"{name}.npy", mmap_mode="c", allow_pickle=False) for name in names}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(entry: Path, arrays: Arrays) -> None:
    partial = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    try:
        for name, array in arrays.items():
            np.save(partial / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        (partial / _COMPLETE).write_text(json.dumps({"arrays": sorted(arrays)}))
        if entry.exists():  # an unreadable leftover: replace it
            shutil.rmtree(entry, ignore_errors=True)
        partial.rename(entry)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def cached_arrays(folder: Path | None, key: Mapping[str, Any], build: Callable[[], Arrays]) -> Arrays:
    """The arrays ``build`` makes for ``key``: from ``folder`` (memory-mapped) when they are there, else built once
    under a lock, written there and mapped. Without a folder, ``build``'s own arrays, in this process's memory."""
    if folder is None:
        return build()
    entry = folder / entry_name(key)
    found = _read(entry)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / f"{entry.name}.lock"):
        found = _read(entry)  # another process may have built it while this one waited
        if found is None:
            _write(entry, build())
            found = _read(entry)
    if found is None:
        raise OSError(f"the array cache entry {entry} cannot be read back after writing it")
    return found
