"""The methods ported onto the plug-in architecture give the results they gave before it, bit for bit.

The expected digests and accuracies were produced by the code as it was before the plug-ins (commit 94651d7),
running exactly these configurations in one process (``tests/in_process.py``): every preset path (the local
update, FedProx's proximal term, entropy selection, FedEntOpt selection, both aggregation rules) must still
compute the same global model. Pretraining is off (its recipe changed on purpose since) and the features are
float32 (the float16 cache came later) and the public split the 10% it was then, so only the port is under test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.in_process import run_in_process, small_run_config

#: case -> (run-config overrides, test accuracy per round, digest of the final model's values)
BEFORE_THE_PLUG_INS = {
    "fedavg": ({"method": "fedavg"}, [0.25, 0.25, 0.5], "593c797f27770c2e"),
    "fedprox": ({"method": "fedprox"}, [0.25, 0.6000000238418579, 0.5], "9f662cdfbb6af6ee"),
    "fedft-eds": ({"method": "fedft-eds"}, [0.25, 0.4950000047683716, 0.25], "475d81a6797a2956"),
    "fedft-rds-fedentopt": (
        {"method": "fedft-rds", "client-selection": "fedentopt", "fraction-train": 0.5, "fedentopt-buffer": 0.25},
        [0.30000001192092896, 0.25, 0.44999998807907104],
        "bee16a973eea733f",
    ),
    "fedft-eds-clipped-mean": (
        {"method": "fedft-eds", "aggregation": "clipped-mean"},
        [0.25, 0.25, 0.25],
        "cf429c6e8e22649f",
    ),
}


@pytest.mark.parametrize("case", list(BEFORE_THE_PLUG_INS))
def test_a_ported_method_computes_what_it_computed_before(tmp_path: Path, case: str) -> None:
    overrides, accuracies, digest = BEFORE_THE_PLUG_INS[case]
    base = {"pretrain": "none", "aggregation": "mean", "feature-cache-dtype": "float32", "public-fraction": 0.1}
    base |= {"device": "cpu", "server-device": "cpu"}  # the digests were recorded on the CPU
    run_in_process(small_run_config(tmp_path, **{**base, **overrides}), num_partitions=4)
    run = tmp_path / "results" / "run"
    rounds = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    model = torch.load(run / "model.pt")
    assert [r["accuracy"] for r in rounds] == accuracies
    assert hashlib.sha1(b"".join(v.numpy().tobytes() for v in model.values())).hexdigest()[:16] == digest
