"""docs/results.md's tables and the figures of its verdicts, each block from the summaries it names."""

from __future__ import annotations

from experiments.doc_tables import fedentopt, fedft, fedft_start, kafal, overview, thesis
from experiments.doc_tables.blocks import Block

BLOCKS: dict[str, Block] = {
    "overview": overview.overview,
    "against-papers": overview.against_papers,
    "fedft-table2-mini": fedft.table2_mini,
    "fedft-table2-mini-05": fedft.table2_mini_05,
    "fedft-table2-two-step": fedft_start.table2_full_two_step,
    "fedft-table2-mini-two-step": fedft_start.table2_mini_two_step,
    "fedft-table2-full": fedft.table2_full,
    "fedft-table2-full-wrn": fedft.table2_full_wrn,
    "fedft-table3-two-step": fedft_start.table3_two_step,
    "fedft-table3": fedft.table3,
    "fedft-temperature": fedft.temperature,
    "fedft-freeze": fedft.freeze,
    "fedft-alpha": fedft.alpha,
    "fedft-cka": fedft.cka,
    "fedentopt-table1": fedentopt.table1,
    "fedentopt-participation": fedentopt.participation,
    "fedentopt-table2": fedentopt.table2,
    "kafal-fig14": kafal.fig14,
    "kafal-fig4": kafal.fig4,
    "kafal-table1": kafal.table1,
    "fedfsc-table43": thesis.fedfsc_table43,
    "fedfsc-dampening": thesis.fedfsc_dampening,
    "fedfsc-table45": thesis.fedfsc_table45,
    "fedsplit": thesis.fedsplit,
    "fedat-table57": thesis.fedat_table57,
    "fedat-table58": thesis.fedat_table58,
    "fedat-single": thesis.fedat_single,
    "fedkad-table511": thesis.fedkad_table511,
}
