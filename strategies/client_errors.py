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


def _printable(text: str) -> str:
    """A client's text for our logs and files: control characters (a forged log line, terminal codes) become '?'."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def error_summary(reason: str) -> str:
    """``"InjectedFault: fail-partitions: …"`` from a chained traceback: the first exception raised (the
    root cause), without module path or Flower's wrapper; else the first line of the text. Whatever the client
    wrote, the result is one printable line of at most ``MAX_CHARS`` characters."""
    return _printable(_summary(reason if isinstance(reason, str) else repr(reason)))


def _summary(reason: str) -> str:
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
