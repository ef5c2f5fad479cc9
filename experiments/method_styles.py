"""One colour and marker per method, fixed by the method's place in the experiment file's list: a method looks
the same in every panel and figure of an experiment, whichever subset of the methods a panel draws."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: matplotlib's tab10 colours, as hex so the map does not need matplotlib
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
#: seven markers against ten colours: (colour, marker) pairs repeat only after 70 methods
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@dataclass(frozen=True)
class MethodStyle:
    """How one method is drawn."""

    colour: str
    marker: str


def method_styles(methods: Sequence[str]) -> dict[str, MethodStyle]:
    """Method label -> style, by the label's position in ``methods`` (the experiment file's order)."""
    return {
        method: MethodStyle(COLOURS[index % len(COLOURS)], MARKERS[index % len(MARKERS)])
        for index, method in enumerate(dict.fromkeys(methods))
    }
