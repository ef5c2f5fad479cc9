"""``fail-partitions``: faults injected into chosen clients, to test how the server copes (testing only).

The value lists ``partition:mode`` pairs, e.g. ``"2:raise,5:hang"``. Every round it is selected, such a
client raises (``raise``), sleeps past ``round-timeout`` before answering (``hang``) or answers with
NaN arrays (``garbage``).
"""

from __future__ import annotations

FAULT_MODES = ("raise", "hang", "garbage")


def parse_fail_partitions(text: str) -> dict[int, str]:
    """``"2:raise,5:hang"`` -> ``{2: "raise", 5: "hang"}``; raise ValueError saying what is wrong."""
    faults: dict[int, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        pid, sep, mode = item.partition(":")
        if not sep or not pid.strip().isdigit() or mode.strip() not in FAULT_MODES:
            raise ValueError(f"{item!r} is not 'partition:mode' with mode one of {', '.join(FAULT_MODES)}")
        faults[int(pid)] = mode.strip()
    return faults
