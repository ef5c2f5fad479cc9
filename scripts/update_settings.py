"""Rewrite what is written from the settings' declarations: pyproject's ``[tool.flwr.app.config]`` with its tables
per namespace (``[tool.flwr.app.config.fedprox]``) and the settings table of docs/configuration.md
(``python -m scripts.update_settings``; tests/test_run_config.py checks both are current)."""

from __future__ import annotations

import re
from pathlib import Path
from re import Pattern

from methods.registry import CATALOGUE
from run_config.defaults import PYPROJECT, markdown_table, pyproject_config

SETTINGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
TABLE_HEADER = "| key | default | meaning |"
SECTION = "[tool.flwr.app.config]"
#: The first pyproject section after the config's own tables.
NEXT_SECTION = re.compile(r"\n\[(?!tool\.flwr\.app\.config[.\]])")


def replace_block(text: str, start_marker: str, new_block: str, end: Pattern[str]) -> str:
    """``text`` with the block from ``start_marker`` up to (not including) the first match of ``end`` replaced."""
    start = text.index(start_marker)
    found = end.search(text, start + len(start_marker))
    return text[:start] + new_block + text[found.start() if found else len(text) :]


def main() -> None:
    SETTINGS_PAGE.write_text(
        replace_block(SETTINGS_PAGE.read_text(), TABLE_HEADER, markdown_table(CATALOGUE), re.compile("\n\n"))
    )
    config = pyproject_config(CATALOGUE) + "\n"
    PYPROJECT.write_text(replace_block(PYPROJECT.read_text(), SECTION, config, NEXT_SECTION))


if __name__ == "__main__":
    main()
