"""``python -m experiments docs [--check]``: rewrite the generated blocks of the README, docs/results.md and the method
pages that have them from the recorded summaries; with ``--check``, write nothing and exit 1 naming each page whose
blocks differ from what the summaries give (``tests/test_doc_tables.py`` does the same)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from experiments.doc_tables import readme, results, scaffold
from experiments.doc_tables.blocks import Block, BlockError, rewrite
from experiments.doc_tables.recorded import ROOT, RecordError

#: page (relative to the repository root) -> its generated blocks
PAGES: Mapping[str, Mapping[str, Block]] = {
    "README.md": readme.BLOCKS,
    "docs/results.md": results.BLOCKS,
    "docs/methods/scaffold.md": scaffold.BLOCKS,
}


def regenerated(page: str) -> tuple[str, str]:
    """The page as it is and as its blocks regenerate it."""
    text = (ROOT / page).read_text()
    return text, rewrite(text, PAGES[page], page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 where a page differs")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        try:
            now, generated = regenerated(page)
        except (BlockError, RecordError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if now == generated:
            continue
        stale.append(page)
        if not args.check:
            (ROOT / page).write_text(generated)
            print(f"rewrote {page}")
    if args.check and stale:
        print(f"out of date with the recorded summaries: {', '.join(stale)} (python -m experiments docs)")
        return 1
    return 0
