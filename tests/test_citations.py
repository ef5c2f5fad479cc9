"""Nothing in the repository cites a document that is not in it: code and docs cite the papers' sections, not the
project's private notes (the archived results are kept verbatim and are exempt)."""

from __future__ import annotations

import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PRIVATE = re.compile(r"\bSPEC(\.md| §)|THESIS-METHODS")
SKIPPED = {".venv", ".git", "results", "archive", "__pycache__", ".flwr-home"}


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = [
        str(path.relative_to(PROJECT))
        for path in PROJECT.rglob("*")
        if path.suffix in {".py", ".md", ".toml", ".yaml"}
        and not SKIPPED & set(path.relative_to(PROJECT).parts)
        and path.name != "test_citations.py"
        and PRIVATE.search(path.read_text(errors="replace"))
    ]
    assert citing == []
