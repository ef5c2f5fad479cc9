"""``fail-partitions``: faults and attacks injected into chosen clients, to test how the server copes (testing only).

The value lists ``partition:mode`` pairs, e.g. ``"2:raise,5:scale100"``. Every round it is selected, such a
client raises (``raise``), sleeps past ``round-timeout`` before answering (``hang``), answers with NaN arrays
(``garbage``), or kills its own process (``die``, as the kernel kills one for want of memory): failures the server
must survive, or, for ``die`` in simulation, stop on (``simulation/dead_actors.py``). The other modes are attacks
a validated reply can still carry (arrays of the right names, shapes and dtypes with chosen values): the update
Δ = θ_trained − θ_sent scaled ×100 (``scale100``) or ×−10 (``signflip10``), every value 1e20 (``huge``),
``num-examples`` ×1000 with a sign-flipped update (``inflate``), a random Gaussian update of the honest update's
norm (``gaussian``), or honest training on the wrong labels C − 1 − y (``labelflip``).
"""

from __future__ import annotations

FAILURE_MODES = ("raise", "hang", "garbage", "die")
ATTACK_MODES = ("scale100", "signflip10", "huge", "inflate", "gaussian", "labelflip")
FAULT_MODES = FAILURE_MODES + ATTACK_MODES


def parse_fail_partitions(text: str) -> dict[int, str]:
    """``"2:raise,5:hang"`` -> ``{2: "raise", 5: "hang"}``; raise ValueError saying what is wrong."""
    faults: dict[int, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        pid, sep, mode = item.partition(":")
        if not sep or not pid.strip().isdigit() or mode.strip() not in FAULT_MODES:
            raise ValueError(f"{item!r} is not 'partition:mode' with mode one of {', '.join(FAULT_MODES)}")
        faults[int(pid)] = mode.strip()
    return faults
