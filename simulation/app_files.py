"""The app's own files, copied to a folder for ``flwr run`` to pack, so that Flower does not walk the whole project.

``flwr run DIR`` builds the app's FAB by walking every file under DIR and only then applying ``.gitignore`` and its
include rules. In a project folder holding its virtual environment (``make`` puts one in ``.venv``: tens of thousands
of files) that walk took 10 s on the development machine, at every run. ``stage_app`` copies what Flower could pack
(the file types its FAB holds, outside hidden, cache and ``.gitignore``'d folders) with ``pyproject.toml`` and
``.gitignore``, and Flower's own rules then pick from the copy what they pick from the project, less the files in
hidden folders (``.github``'s workflow files and the like, which Flower would pack and the app never reads).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pathspec

#: The file types a Flower 1.41 FAB holds (``flwr.common.constant.FAB_INCLUDE_PATTERNS``).
FAB_SUFFIXES = (".py", ".toml", ".md", ".yaml", ".yml", ".json", ".jsonl")
FAB_NAMES = ("LICENSE", ".gitignore")


def _ignored_folders(project: Path) -> pathspec.PathSpec:
    gitignore = project / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.is_file() else []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def stage_app(project: Path, target: Path) -> Path:
    """Copy ``project``'s packable files into ``target`` (created); return ``target``."""
    ignored = _ignored_folders(project)
    target.mkdir(parents=True, exist_ok=True)
    inside = target.resolve()
    for folder, subfolders, files in os.walk(project, followlinks=False):
        relative = Path(folder).relative_to(project)
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".")
            and name != "__pycache__"
            and not ignored.match_file(f"{(relative / name).as_posix()}/")
            and (Path(folder) / name).resolve() != inside
        ]
        for name in files:
            source = Path(folder) / name
            if source.is_symlink() or not (name.endswith(FAB_SUFFIXES) or name in FAB_NAMES):
                continue
            destination = target / relative / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    return target
