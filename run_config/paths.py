"""What a run name and a path setting may hold, so that no setting writes where it should not.

A run name becomes one folder inside ``results-dir``: it may hold only characters that are safe in a file
name on every platform and in a shell, may not start with a dot (``.``, ``..`` and hidden folders) and so
can never be absolute or climb out of ``results-dir``. The folder settings (``results-dir``, the cache
folders, ``data-dir``, ``pretrain-checkpoint``) are the operator's to point anywhere; they may not hold
control characters (a NUL byte fails every file call, a newline garbles logs and launch commands).
Each check returns why a value is refused, or None.
"""

from __future__ import annotations

import re

#: The longest file name common file systems allow (bytes; run names are ASCII).
MAX_NAME_LENGTH = 255
#: Letters, digits and ``- _ . = +`` (experiment cells are named ``<method>__<key>=<value>__seed<n>``, and
#: method labels such as ``fedavg+fedentopt`` combine methods).
_NAME_CHARACTERS = re.compile(r"[A-Za-z0-9._=+-]*")
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def folder_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one folder's name inside another, or None; an empty name is refused too."""
    if not name:
        return "must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"must be at most {MAX_NAME_LENGTH} characters long, not {len(name)}"
    if not _NAME_CHARACTERS.fullmatch(name):
        unsafe = sorted({c for c in name if not _NAME_CHARACTERS.fullmatch(c)})
        return (
            f"may hold only letters, digits, '-', '_', '.', '=' and '+', not {', '.join(repr(c) for c in unsafe)} "
            "(it names one folder, never a path)"
        )
    if name.startswith("."):
        return "must not start with '.' (no '.', '..' or hidden folders)"
    return None


def run_name_problem(name: str) -> str | None:
    """Why ``name`` is not a usable ``run-name``, or None; empty is allowed (a name is generated)."""
    return folder_name_problem(name) if name else None


def path_problem(value: str) -> str | None:
    """Why ``value`` is not a usable path setting, or None; empty is allowed (each setting says what it means)."""
    if _CONTROL_CHARACTERS.search(value):
        return "must not hold control characters such as NUL or a line break"
    return None


def required_path_problem(value: str) -> str | None:
    """``path_problem`` for a setting that must name a folder."""
    return "must name a folder, not be empty" if not value.strip() else path_problem(value)
