"""An experiment's finished cells in one cells.tar.xz (experiments/cell_archive.py): packed from the cell folders,
read back as they were, and refused, naming the file, when missing, truncated or of another format."""

from __future__ import annotations

import io
import json
import lzma
import tarfile
from pathlib import Path

import pytest

from experiments.__main__ import main
from experiments.cell_archive import (
    ARCHIVE_FILE,
    CELLS_DIR,
    ArchiveError,
    archive_bytes,
    finished_cell_names,
    pack,
    read_archive,
    recorded_cells,
    write_archive,
)
from experiments.cell_results import CellFileError


def write_cell(results_dir: Path, name: str, best: float, status: str = "completed", folder: str = CELLS_DIR) -> Path:
    """A run folder as the ServerApp leaves it: its records, weights, a figure and the lock."""
    cell = results_dir / folder / name
    cell.mkdir(parents=True, exist_ok=True)
    (cell / "config.json").write_text(json.dumps({"seed": 0, "method": "fedavg"}, indent=2) + "\n")
    (cell / "rounds.jsonl").write_text(json.dumps({"round": 1, "accuracy": best}) + "\n")
    (cell / "summary.json").write_text(json.dumps({"status": status, "best_accuracy": best}))
    (cell / "cycles.jsonl").write_text('{"cycle": 0}\n')  # a method's own file
    (cell / "model.pt").write_bytes(b"weights")
    (cell / "accuracy.png").write_bytes(b"\x89PNG")
    (cell / ".lock").write_text("")
    return cell


def test_pack_moves_the_finished_cells_records_into_the_archive_and_leaves_the_rest(tmp_path: Path) -> None:
    done = write_cell(tmp_path, "fedavg__seed0", 0.5)
    running = write_cell(tmp_path, "fedavg__seed1", 0.1, status="interrupted")
    beside = write_cell(tmp_path, "seed0", 0.9, folder="centralised")  # a run recorded beside the cells
    records = {
        run: {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".json", ".jsonl")}
        for run, folder in (("cells/fedavg__seed0", done), ("centralised/seed0", beside))
    }
    assert pack(tmp_path) == tmp_path / ARCHIVE_FILE
    assert read_archive(tmp_path / ARCHIVE_FILE) == records
    assert sorted(p.name for p in done.iterdir()) == [".lock", "accuracy.png", "model.pt"]  # weights, figure, lock
    assert not (beside / "summary.json").exists()
    assert (running / "rounds.jsonl").exists()  # an unfinished cell stays in its folder, to resume
    assert finished_cell_names(tmp_path) == {"fedavg__seed0"}
    assert recorded_cells(tmp_path)["fedavg__seed0"].summary["best_accuracy"] == 0.5


def test_a_folder_left_with_its_lock_alone_is_removed(tmp_path: Path) -> None:
    cell = write_cell(tmp_path, "fedavg__seed0", 0.5)
    (cell / "model.pt").unlink()
    (cell / "accuracy.png").unlink()
    pack(tmp_path)
    assert not cell.exists()


def test_cells_finished_after_a_pack_join_the_archive_and_a_folder_wins_over_it(tmp_path: Path) -> None:
    write_cell(tmp_path, "fedavg__seed0", 0.5)
    pack(tmp_path)
    write_cell(tmp_path, "fedavg__seed1", 0.6)  # finished since
    assert {name: c.summary["best_accuracy"] for name, c in recorded_cells(tmp_path).items()} == {
        "fedavg__seed0": 0.5,
        "fedavg__seed1": 0.6,
    }
    write_cell(tmp_path, "fedavg__seed0", 0.7)  # its folder again, as a hand-made rerun would leave it
    assert recorded_cells(tmp_path)["fedavg__seed0"].summary["best_accuracy"] == 0.7
    pack(tmp_path)
    assert sorted(read_archive(tmp_path / ARCHIVE_FILE)) == ["cells/fedavg__seed0", "cells/fedavg__seed1"]
    assert recorded_cells(tmp_path)["fedavg__seed0"].summary["best_accuracy"] == 0.7
    assert not (tmp_path / CELLS_DIR / "fedavg__seed1" / "summary.json").exists()


def test_pack_drops_the_cells_asked_for(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_cell(tmp_path, f"fedavg__seed{seed}", 0.5)
    pack(tmp_path)
    pack(tmp_path, drop=("*__seed1",))
    assert finished_cell_names(tmp_path) == {"fedavg__seed0"}


def test_pack_with_nothing_finished_writes_nothing(tmp_path: Path) -> None:
    write_cell(tmp_path, "fedavg__seed0", 0.5, status="failed")
    assert pack(tmp_path) is None and not (tmp_path / ARCHIVE_FILE).exists()


def test_the_archive_is_the_same_bytes_for_the_same_cells_and_any_tar_reads_it(tmp_path: Path) -> None:
    runs = {"cells/b__seed0": {"summary.json": b"{}", "config.json": b"{}"}, "cells/a__seed0": {"rounds.jsonl": b""}}
    assert archive_bytes(runs) == archive_bytes(dict(reversed(runs.items())))
    write_archive(tmp_path / ARCHIVE_FILE, runs)
    with tarfile.open(tmp_path / ARCHIVE_FILE) as tar:  # the standard library, as `tar -xJf` reads it
        members = tar.getmembers()
    assert [m.name for m in members] == [
        "cells/a__seed0/rounds.jsonl",
        "cells/b__seed0/config.json",
        "cells/b__seed0/summary.json",
    ]
    assert {(m.mtime, m.mode, m.uid, m.uname) for m in members} == {(0, 0o644, 0, "")}


def test_a_missing_archive_is_named(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match=f"^{tmp_path / ARCHIVE_FILE}: missing$"):
        read_archive(tmp_path / ARCHIVE_FILE)


def test_a_truncated_archive_is_named_and_nothing_of_it_is_read(tmp_path: Path) -> None:
    write_cell(tmp_path, "fedavg__seed0", 0.5)
    pack(tmp_path)
    path = tmp_path / ARCHIVE_FILE
    whole = path.read_bytes()
    for cut in (len(whole) - 1, len(whole) // 2, 20, 0):
        path.write_bytes(whole[:cut])
        with pytest.raises(ArchiveError, match=f"^{path}: truncated"):
            recorded_cells(tmp_path)


def test_an_archive_of_another_format_is_named(tmp_path: Path) -> None:
    path = tmp_path / ARCHIVE_FILE
    gzip_tar = io.BytesIO()
    with tarfile.open(fileobj=gzip_tar, mode="w:gz") as tar:
        info = tarfile.TarInfo("cells/a__seed0/summary.json")
        tar.addfile(info, io.BytesIO(b""))
    for content in (gzip_tar.getvalue(), b"a text file\n"):
        path.write_bytes(content)
        with pytest.raises(ArchiveError, match=f"^{path}: damaged, or not an xz file"):
            read_archive(path)
    path.write_bytes(lzma.compress(b"xz, but no tar inside" * 100))
    with pytest.raises(ArchiveError, match=f"^{path}: not a tar archive inside the xz stream"):
        read_archive(path)


def _xz_tar(path: Path, *members: tarfile.TarInfo) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"") if member.isfile() else None)
    path.write_bytes(lzma.compress(raw.getvalue()))


def test_members_other_than_run_files_are_refused_naming_them(tmp_path: Path) -> None:
    path = tmp_path / ARCHIVE_FILE
    link = tarfile.TarInfo("cells/a__seed0/summary.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    _xz_tar(path, link)
    with pytest.raises(ArchiveError, match="member 'cells/a__seed0/summary.json' is not a regular file"):
        read_archive(path)
    for name in ("../a__seed0/summary.json", "cells/summary.json", "/cells/a/summary.json", "cells/a/b/c.json"):
        _xz_tar(path, tarfile.TarInfo(name))
        with pytest.raises(ArchiveError, match="is not <folder>/<run>/<file>"):
            read_archive(path)


def test_a_cell_missing_a_record_is_named(tmp_path: Path) -> None:
    write_archive(tmp_path / ARCHIVE_FILE, {"cells/a__seed0": {"summary.json": b"{}", "rounds.jsonl": b""}})
    with pytest.raises(CellFileError, match=r"cells/a__seed0 .*: config.json is missing"):
        recorded_cells(tmp_path)


#: The smallest recorded experiment (10 cells, 11 kB archive): its tables as committed, and its archive.
RECORDED = Path(__file__).resolve().parents[1] / "measurements" / "experiments" / "fedat-table5-7-2026-11-26"


def test_report_writes_a_recorded_experiments_tables_again_from_its_archive_byte_for_byte(tmp_path: Path) -> None:
    copy = tmp_path / RECORDED.name
    copy.mkdir()
    for name in ("experiment.yaml", ARCHIVE_FILE):
        (copy / name).write_bytes((RECORDED / name).read_bytes())
    assert main(["report", "--no-figures", str(copy)]) == 0
    written = sorted(p.name for p in copy.iterdir() if p.name not in ("experiment.yaml", ARCHIVE_FILE))
    assert {"summary.md", "summary.json", "summary.csv"} <= set(written)
    for name in written:
        assert (copy / name).read_bytes() == (RECORDED / name).read_bytes(), name
    assert main(["report", "--check", str(RECORDED)]) == 0
    archive = copy / ARCHIVE_FILE
    archive.write_bytes(archive.read_bytes()[:-100])  # truncated: named, and no table written from part of it
    (copy / "summary.md").unlink()
    with pytest.raises(ArchiveError, match=f"^{archive}: truncated"):
        recorded_cells(copy)
    assert main(["report", "--no-figures", str(copy)]) == 2
    assert not (copy / "summary.md").exists()
