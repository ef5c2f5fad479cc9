"""Rewrite what is written from the settings' declarations: pyproject's ``[tool.flwr.app.config]`` and the settings
table of docs/configuration.md (``python -m scripts.update_settings``; tests/test_run_config.py checks both are
current)."""

from __future__ import annotations

from pathlib import Path

from methods.registry import CATALOGUE
from run_config.defaults import PYPROJECT, markdown_table, pyproject_config

SETTINGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
TABLE_HEADER = "| key | default | meaning |"
SECTION = "[tool.flwr.app.config]"


def replace_block(text: str, start_marker: str, new_block: str, end_marker: str) -> str:
    """``text`` with the block from ``start_marker`` up to (not including) ``end_marker`` replaced."""
    start = text.index(start_marker)
    end = text.index(end_marker, start)
    return text[:start] + new_block + text[end:]


def main() -> None:
    SETTINGS_PAGE.write_text(replace_block(SETTINGS_PAGE.read_text(), TABLE_HEADER, markdown_table(CATALOGUE), "\n\n"))
    PYPROJECT.write_text(replace_block(PYPROJECT.read_text(), SECTION, pyproject_config(CATALOGUE) + "\n", "\n["))


if __name__ == "__main__":
    main()
