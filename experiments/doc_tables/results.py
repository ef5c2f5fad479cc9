"""docs/results.md's tables and the figures of its verdicts, each block from the summaries it names."""

from __future__ import annotations

from experiments.doc_tables import overview
from experiments.doc_tables.blocks import Block

BLOCKS: dict[str, Block] = {
    "overview": overview.overview,
    "against-papers": overview.against_papers,
}
