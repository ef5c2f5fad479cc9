"""FedFT-EDS (Shi, Radu, Yang, Algorithm 1) and its ablations FedFT-RDS and FedFT-ALL: the server's pretrained φ frozen
(``freeze = mid``: WRN's stem and groups 1-2), θ above it fine-tuned on the highest-entropy (EDS), a random (RDS) or
all (ALL) of the local data; only θ travels after the first round. Everything they need is the shared machinery:
the frozen-feature cache and data selection in ``client_app/local_update.py``, θ-only aggregation in
``strategies/partial_fedavg.py``."""

from __future__ import annotations

from methods.base import Method

FEDFT_ALL = Method(
    "fedft-all",
    "FedFT on all local data.",
    presets={"pretrain-round": True, "freeze": "mid", "data-selection": "all", "selection-fraction": 1.0},
)
FEDFT_RDS = Method(
    "fedft-rds",
    "FedFT on a random 10% of the local data, redrawn every round.",
    presets={"pretrain-round": True, "freeze": "mid", "data-selection": "random", "selection-fraction": 0.1},
)
FEDFT_EDS = Method(
    "fedft-eds",
    "FedFT on the 10% of local samples with the highest hardened-softmax entropy (ρ = `temperature`).",
    presets={"pretrain-round": True, "freeze": "mid", "data-selection": "entropy", "selection-fraction": 0.1},
    paper="FedFT-EDS, Algorithm 1",
)
METHODS = (FEDFT_ALL, FEDFT_RDS, FEDFT_EDS)
