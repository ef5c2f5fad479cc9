"""The method-port cases of ``tests/test_method_ports.py``, run with CPU-independent numerics; prints JSON.

    ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE PYTHONPATH=<checkout> python tests/method_port_cases.py

Runs each case with the code of ``<checkout>`` (this file imports only ``tests.in_process`` from it, so it runs
the code of before the plug-ins, commit 94651d7, as well as today's) and prints ``{case: [accuracy per round,
digest of the final model]}``.

Why pinned numerics: torch picks its CPU kernels by the processor (oneDNN's convolutions, MKL's matrix products,
ATen's vectorised loops), and they round differently, so a bit-for-bit digest recorded on one CPU generation
fails on another (it did, on a newer AMD EPYC). With ATen's portable kernels (``ATEN_CPU_CAPABILITY=default``),
MKL's reproducible code path (``MKL_CBWR=COMPATIBLE``), oneDNN and NNPACK off and one thread, every x86-64 CPU
runs the same instructions in the same order (checked here: the same digests with MKL limited to SSE4.2, AVX2 or
unlimited, where unpinned runs differ). Both variables are read once when torch starts, hence a process of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

#: case -> run-config overrides: every preset path (the local update, FedProx's proximal term, entropy selection,
#: FedEntOpt selection, both aggregation rules).
CASES = {
    "fedavg": {"method": "fedavg"},
    "fedprox": {"method": "fedprox"},
    "fedft-eds": {"method": "fedft-eds"},
    "fedft-rds-fedentopt": {
        "method": "fedft-rds",
        "client-selection": "fedentopt",
        "fraction-train": 0.5,
        "fedentopt-buffer": 0.25,
    },
    "fedft-eds-clipped-mean": {"method": "fedft-eds", "aggregation": "clipped-mean"},
}
#: Pretraining is off (its recipe changed on purpose since), the features are float32 (the float16 cache came
#: later) and the public split the 10% it was then, so that only the port is under test.
BASE = {
    "pretrain": "none",
    "aggregation": "mean",
    "feature-cache-dtype": "float32",
    "public-fraction": 0.1,
    "device": "cpu",
    "server-device": "cpu",
}
PINNED_ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


def pin_numerics() -> None:
    """The rest of the pinning, done in this process; refuses to run where the environment was not pinned."""
    unpinned = {k: v for k, v in PINNED_ENVIRONMENT.items() if os.environ.get(k) != v}
    if unpinned or torch.backends.cpu.get_cpu_capability() != "DEFAULT":
        sys.exit(f"set {' '.join(f'{k}={v}' for k, v in PINNED_ENVIRONMENT.items())} before starting Python")
    torch.backends.mkldnn.enabled = False
    torch.backends.nnpack.set_flags(False)
    torch.set_num_threads(1)


def run_cases() -> dict[str, list]:
    from tests.in_process import run_in_process, small_run_config

    results = {}
    for case, overrides in CASES.items():
        with tempfile.TemporaryDirectory(prefix=f"method-port-{case}-") as folder:
            tmp_path = Path(folder)
            run_in_process(small_run_config(tmp_path, **{**BASE, **overrides}), num_partitions=4)
            run = tmp_path / "results" / "run"
            accuracies = [json.loads(line)["accuracy"] for line in (run / "rounds.jsonl").read_text().splitlines()]
            model = torch.load(run / "model.pt")
        digest = hashlib.sha1(b"".join(v.numpy().tobytes() for v in model.values())).hexdigest()[:16]
        results[case] = [accuracies, digest]
    return results


if __name__ == "__main__":
    pin_numerics()
    print(json.dumps(run_cases()))
