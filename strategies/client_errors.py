"""One readable line for a client's error reply.

Flower forwards a failed ClientApp's error as text: under Ray a chained traceback with colour codes,
thousands of characters long; from a deployed SuperNode ``<class 'module.Name'>:<'message'>``. The
results files and the log keep the root cause only.
"""

from __future__ import annotations

import re

_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Fault|Interrupt|Exit)\w*): (.+)$")
#: How a deployed SuperNode reports a ClientApp exception: ``<class 'pkg.mod.Name'>:<'message'>``.
_CLASS_AND_MESSAGE = re.compile(r"^<class '(?:[\w.]+\.)?(\w+)'>:<'(.*)'>$", re.DOTALL)
MAX_CHARS = 300


def error_summary(reason: str) -> str:
    """``"InjectedFault: fail-partitions: …"`` from a chained traceback: the first exception raised (the
    root cause), without module path or Flower's wrapper; else the first line of the text."""
    text = _COLOUR.sub("", reason)
    for line in text.splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if match and match.group(1) != "ClientAppException":
            return f"{match.group(1)}: {match.group(2)}"[:MAX_CHARS]
    wrapped = _CLASS_AND_MESSAGE.match(text.strip())
    if wrapped:
        return f"{wrapped.group(1)}: {wrapped.group(2)}"[:MAX_CHARS]
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:MAX_CHARS]
