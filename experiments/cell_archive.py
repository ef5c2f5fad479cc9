"""An experiment's finished runs in one compressed file beside its tables: ``<results-dir>/cells.tar.xz``.

Layout: one member per recorded file, ``<run>/<file>``, where ``<run>`` is the run folder's path inside the results
folder: ``cells/<cell name>`` for the experiment's cells (a run recorded beside them keeps its own path, such as a
centralised bound's ``centralised/seed0``). A run keeps its records (config.json, rounds.jsonl, summary.json and its
method's own files, such as KAFAL's cycles.jsonl), not its weights and checkpoints (``*.pt``), figures (``*.png``,
drawn again from the records) or lock.

Why tar.xz: Python's standard library reads and writes it (``tarfile``, ``lzma``), and so does any ``tar``
(``tar -xJf cells.tar.xz``); xz compresses across files, which matters for hundreds of small, similar JSON files
(about 9× on the recorded experiments, where gzip gives 5× and zip, which compresses file by file, 6×); and an xz
stream ends with an end marker and a CRC-64, so a truncated or damaged file is told apart from a complete one before
anything is read from it.

Writing is deterministic (members sorted, no times or owners) and checked: the new archive is read back before it
replaces the old one, and only then are the packed records removed from the run folders. The finished runs of a
results folder are those in its archive and those whose folder holds a completed summary.json (a run that finished
since the last pack); a folder's files win over the archive's for the same run.
"""

from __future__ import annotations

import fcntl
import fnmatch
import io
import lzma
import os
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from experiments.cell_results import CellResult, cell_result, is_finished

ARCHIVE_FILE, CELLS_DIR = "cells.tar.xz", "cells"
#: Held while an archive is rewritten, so that two runners finishing at once do not lose each other's cells.
PACK_LOCK_FILE = ".cells.lock"
#: Suffixes of a run folder's files the archive leaves out: weights and checkpoints, figures, logs.
LEFT_OUT = (".pt", ".png", ".log")
#: xz's default preset: 6, within 2% of preset 9's size here at a seventh of its memory (94 MB, not 674 MB).
PRESET = 6

#: Run path (``cells/<cell name>``) -> its recorded files (file name -> content).
Runs = dict[str, dict[str, bytes]]


class ArchiveError(ValueError):
    """An archive is missing, truncated, damaged or not an xz-compressed tar of run folders; the message names it."""


def archived(name: str) -> bool:
    """Whether a run folder's file of this name goes into the archive."""
    return not name.startswith(".") and not name.endswith(LEFT_OUT)


def _run_path(member: str, archive: Path) -> tuple[str, str]:
    """``cells/<name>/<file>`` -> (``cells/<name>``, ``<file>``); anything else is refused."""
    parts = PurePosixPath(member).parts
    if len(parts) != 3 or member.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ArchiveError(f"{archive}: member {member!r} is not <folder>/<run>/<file>")
    return f"{parts[0]}/{parts[1]}", parts[2]


def read_archive(path: Path) -> Runs:
    """Every run an archive holds; ``ArchiveError`` naming ``path`` when it is missing, truncated, damaged or of
    another format. The whole xz stream is decompressed and checked before any member is read."""
    try:
        compressed = path.read_bytes()
    except FileNotFoundError:
        raise ArchiveError(f"{path}: missing") from None
    except OSError as err:
        raise ArchiveError(f"{path}: cannot be read: {err.strerror}") from None
    try:
        data = lzma.decompress(compressed, format=lzma.FORMAT_XZ)
    except lzma.LZMAError as err:
        kind = "truncated" if "ended before" in str(err) else "damaged, or not an xz file"
        raise ArchiveError(f"{path}: {kind} ({err})") from None
    runs: Runs = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    raise ArchiveError(f"{path}: member {member.name!r} is not a regular file")
                run, name = _run_path(member.name, path)
                content = tar.extractfile(member)
                runs.setdefault(run, {})[name] = content.read() if content is not None else b""
    except tarfile.TarError as err:
        raise ArchiveError(f"{path}: not a tar archive inside the xz stream ({err})") from None
    return runs


def archive_bytes(runs: Mapping[str, Mapping[str, bytes]]) -> bytes:
    """The archive of ``runs``, the same bytes for the same runs: members sorted, no times, owners or modes but
    0644."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for run in sorted(runs):
            for name in sorted(runs[run]):
                content = runs[run][name]
                info = tarfile.TarInfo(f"{run}/{name}")
                info.size, info.mtime, info.mode = len(content), 0, 0o644
                tar.addfile(info, io.BytesIO(content))
    return lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=PRESET)


def write_archive(path: Path, runs: Mapping[str, Mapping[str, bytes]]) -> None:
    """Write ``runs`` to ``path``: to a temporary file beside it, read back and compared, then renamed over it."""
    for run in runs:
        _run_path(f"{run}/file", path)
    temporary = path.with_name(f".{path.name}.writing")
    temporary.write_bytes(archive_bytes(runs))
    if read_archive(temporary) != {run: dict(files) for run, files in runs.items() if files}:
        temporary.unlink()
        raise ArchiveError(f"{path}: the archive read back differs from what was written; nothing replaced")
    os.replace(temporary, path)


def finished_run_folders(results_dir: Path) -> dict[str, Path]:
    """Run path -> folder, for every run folder two levels below ``results_dir`` whose summary.json says it
    completed (``cells/<name>`` and any run recorded beside the cells)."""
    return {
        f"{folder.parent.name}/{folder.name}": folder
        for folder in sorted(results_dir.glob("*/*/"))
        if folder.is_dir() and is_finished(folder)
    }


def folder_files(folder: Path) -> dict[str, bytes]:
    """The files of a run folder the archive keeps."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and archived(p.name)}


def recorded_runs(results_dir: Path) -> Runs:
    """Every finished run of ``results_dir``: its archive's, and those finished in folders since (a folder's files
    win). ``ArchiveError`` when the archive exists but cannot be read. The folders are read before the archive, so
    a pack between the two reads loses nothing."""
    folders = {run: folder_files(folder) for run, folder in finished_run_folders(results_dir).items()}
    path = results_dir / ARCHIVE_FILE
    return {**(read_archive(path) if path.exists() else {}), **folders}


def finished_cell_names(results_dir: Path) -> set[str]:
    """The names of the finished cells of ``results_dir`` (in its archive or its cell folders)."""
    return {run.split("/")[1] for run in recorded_runs(results_dir) if run.startswith(f"{CELLS_DIR}/")}


def recorded_cells(results_dir: Path) -> dict[str, CellResult]:
    """Cell name -> the finished cell's results, from ``recorded_runs``; ``ArchiveError`` or ``CellFileError``
    naming the archive or the cell whose records cannot be read."""
    cells = {}
    for run, files in recorded_runs(results_dir).items():
        folder, name = run.split("/")
        if folder == CELLS_DIR:
            cells[name] = cell_result(files, f"{results_dir / run} (or {results_dir / ARCHIVE_FILE})")
    return cells


@contextmanager
def _pack_lock(results_dir: Path) -> Iterator[None]:
    descriptor = os.open(results_dir / PACK_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def pack(results_dir: Path, drop: Sequence[str] = ()) -> Path | None:
    """Move every finished run's records into ``results_dir/cells.tar.xz`` (with those it already holds, less the
    cells whose name matches a shell-style pattern of ``drop``); then remove the packed records from the run folders,
    and a folder (and ``cells/``) left holding nothing else. Returns the archive, or None when there is nothing to
    pack."""
    path = results_dir / ARCHIVE_FILE
    with _pack_lock(results_dir):
        folders = finished_run_folders(results_dir)
        if not folders and not drop:
            return path if path.exists() else None
        runs = recorded_runs(results_dir)
        kept = {
            run: files
            for run, files in runs.items()
            if not (run.startswith(f"{CELLS_DIR}/") and any(fnmatch.fnmatchcase(run.split("/")[1], p) for p in drop))
        }
        write_archive(path, kept)
        for folder in folders.values():
            for file in folder.iterdir():
                if file.is_file() and archived(file.name):
                    file.unlink()
            left = list(folder.iterdir())
            if all(p.is_file() and p.name.startswith(".") for p in left):  # the run's lock alone
                for hidden in left:
                    hidden.unlink()
                folder.rmdir()
        for parent in {folder.parent for folder in folders.values()}:
            if not any(parent.iterdir()):
                parent.rmdir()
    return path
