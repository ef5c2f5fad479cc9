"""How many of a client's local samples a round trains on when it trains on a share P of them (FedFT-EDS's data
selection, FedAT's metadata fraction): the client draws that many, and the server expects that many."""

from __future__ import annotations

import math


def selection_size(num_samples: int, fraction: float) -> int:
    """⌈P·n⌉, at least one sample (P·n is rounded to 9 decimals first, so 0.1·30 is 3, not 4)."""
    return min(num_samples, max(1, math.ceil(round(fraction * num_samples, 9))))
