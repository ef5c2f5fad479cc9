"""Generated blocks of a Markdown page: the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` is what
the block NAME's function returns, and nothing else."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping

#: A block's text, computed from the recorded summaries.
Block = Callable[[], str]

_MARKER = re.compile(r"<!-- ([a-z0-9-]+):(start|end) -->")


class BlockError(ValueError):
    """A page's markers do not pair up, or name a block that does not exist or appears twice."""


#: Markers of the same form that are not generated blocks: the quick reference's rows, which
#: tests/test_quick_reference.py finds between them. Left as they are.
NOT_GENERATED = frozenset({"quick-reference"})


def rewrite(text: str, blocks: Mapping[str, Block], page: str = "page") -> str:
    """``text`` with every block's content regenerated; BlockError for an unknown, unclosed, nested or repeated
    block, or for a block of ``blocks`` the page does not hold."""
    out: list[str] = []
    seen: list[str] = []
    position = 0
    open_name: str | None = None
    for match in _MARKER.finditer(text):
        name, kind = match.groups()
        if name in NOT_GENERATED:
            continue
        line = text.count("\n", 0, match.start()) + 1
        if kind == "start":
            if open_name is not None:
                raise BlockError(f"{page}:{line}: block {name!r} starts inside block {open_name!r}")
            if name not in blocks:
                raise BlockError(f"{page}:{line}: no generated block is called {name!r}")
            if name in seen:
                raise BlockError(f"{page}:{line}: block {name!r} appears twice")
            out.append(text[position : match.end()])
            open_name, position = name, match.end()
        else:
            if name != open_name:
                raise BlockError(f"{page}:{line}: end of {name!r} where {open_name!r} is open")
            out.append("\n" + blocks[name]().strip("\n") + "\n")
            seen.append(name)
            open_name, position = None, match.start()
    if open_name is not None:
        raise BlockError(f"{page}: block {open_name!r} has no end marker")
    unused = sorted(set(blocks) - set(seen))
    if unused:
        raise BlockError(f"{page}: holds no marker of block(s) {', '.join(unused)}")
    out.append(text[position:])
    return "".join(out)


def prose(*sentences: str, width: int = 120) -> str:
    """Sentences joined into one paragraph wrapped at ``width`` columns, as the docs' hand-written text is (a word
    longer than the width, such as a link, stands on its own line)."""
    return textwrap.fill(" ".join(s.strip() for s in sentences), width, break_long_words=False, break_on_hyphens=False)


def bullet(*sentences: str, width: int = 120) -> str:
    """A list item of ``prose``, its continuation lines indented by two spaces."""
    text = " ".join(s.strip() for s in sentences)
    return textwrap.fill(
        text, width, initial_indent="- ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
