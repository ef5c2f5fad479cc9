"""Rewrite the README's settings table from the settings' declarations (``python -m scripts.update_readme_settings``)."""

from __future__ import annotations

from pathlib import Path

from run_config.defaults import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = "| key | default | meaning |"


def main() -> None:
    text = README.read_text()
    start = text.index(HEADER)
    end = text.index("\n\n", start)
    README.write_text(text[:start] + markdown_table() + text[end:])


if __name__ == "__main__":
    main()
