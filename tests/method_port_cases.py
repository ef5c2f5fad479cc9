"""The method-port cases of ``tests/test_method_ports.py``, run with CPU-independent numerics; prints JSON.

    PYTHONPATH=<checkout> python tests/method_port_cases.py

Runs each case with the code of ``<checkout>`` (this file imports only ``tests.in_process`` from it, so it runs
the code of before the plug-ins, commit 94651d7, as well as today's) and prints ``{"numerics": what was pinned,
"cases": {case: [accuracy per round, digest of the final model]}}``.

Why pinned numerics: torch and numpy pick their CPU code by the processor (oneDNN's convolutions, MKL's matrix
products, ATen's and numpy's vectorised loops), and it rounds differently, so a bit-for-bit digest recorded on one
CPU generation fails on another (it did, on a newer AMD EPYC). Here ATen runs its portable kernels
(``ATEN_CPU_CAPABILITY=default``), MKL its reproducible code path (``MKL_CBWR=COMPATIBLE``), numpy its baseline
loops (``NPY_DISABLE_CPU_FEATURES``: every feature it dispatches on), with oneDNN and NNPACK off and one thread, so
that x86-64 CPUs compute the same operations in the same order (checked on one machine: the same digests with MKL
limited to SSE4.2, AVX2 or unlimited and numpy's AVX2 loops, where unpinned runs differ). The variables are read
when the libraries start, so the script starts itself again with them set.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def _numpy_cpu_features() -> tuple[dict[str, bool], list[str]]:
    """numpy's CPU features (which are on) and those it dispatches on."""
    try:
        from numpy._core import _multiarray_umath as umath  # numpy 2
    except ImportError:
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]  # numpy 1
    return dict(umath.__cpu_features__), list(umath.__cpu_dispatch__)


def pinned_environment() -> dict[str, str]:
    """The variables the libraries read when they start."""
    _, dispatched = _numpy_cpu_features()
    return {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "NPY_DISABLE_CPU_FEATURES": " ".join(dispatched),
    }


def pin_numerics() -> dict[str, Any]:
    """The rest of the pinning, in this process, after checking that the variables took; returns what is pinned."""
    import torch

    features, dispatched = _numpy_cpu_features()
    pinned = {
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": torch.backends.mkl.is_available(),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "numpy_dispatched_features_on": sorted(f for f in dispatched if features.get(f)),
    }
    if pinned["aten_cpu_capability"] != "DEFAULT" or pinned["numpy_dispatched_features_on"]:
        sys.exit(f"the numerics could not be pinned: {pinned}")
    torch.backends.mkldnn.enabled = False
    torch.backends.nnpack.set_flags(False)
    torch.set_num_threads(1)
    return pinned


def run_cases() -> dict[str, list]:
    import torch

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
    environment = pinned_environment()
    if any(os.environ.get(key) != value for key, value in environment.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **environment})
    numerics = pin_numerics()
    print(json.dumps({"numerics": numerics, "cases": run_cases()}))
