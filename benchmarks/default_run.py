"""Wall time, peak memory and accuracy of the default federated run (``make run``).

    python -m benchmarks.default_run [--num-supernodes 10] [--cold]

Runs ``python -m simulation``'s code path with the default configuration and samples, every 0.5 s, the
resident memory of every process of the run (SuperLink, SuperExec, the ServerApp with Ray's driver, Ray's
own processes and the ClientApp actors: all processes whose environment sets the run's FLWR_HOME).
``--cold`` uses an empty pretraining cache, so the time includes pretraining.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

from benchmarks import RESULTS_DIR
from benchmarks.process_memory import PeakMemory, rss_kib
from simulation.local_run import processes_marked, run_simulation


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-supernodes", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="pretrain from scratch (empty cache)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "default_run.json")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedft-bench-"))
    flwr_home = work / "flwr-home"
    overrides: dict[str, object] = {"results-dir": str(work / "results"), "run-name": "default"}
    if args.cold:
        overrides["pretrain-cache-dir"] = str(work / "pretrained")
    sampler = PeakMemory(lambda: processes_marked(str(flwr_home), variable="FLWR_HOME"), rss_kib)
    sampler.start()
    tick = time.perf_counter()
    with (work / "run.log").open("wb") as log:
        code = run_simulation(overrides, num_supernodes=args.num_supernodes, flwr_home=flwr_home, stream_to=log)
    wall = time.perf_counter() - tick
    sampler.stop()
    log_text = (work / "run.log").read_text(errors="replace")
    pretrain = re.search(r"pretraining took ([0-9.]+) s", log_text)
    summary = json.loads((work / "results" / "default" / "summary.json").read_text()) if code == 0 else {}
    report = {
        "exit_code": code,
        "num_supernodes": args.num_supernodes,
        "cold_pretraining_cache": args.cold,
        "wall_seconds": wall,
        "pretraining_seconds": float(pretrain.group(1)) if pretrain else 0.0,
        "peak_rss_total_mb": sampler.peak_total_kib / 2**10,
        "peak_rss_largest_process_mb": sampler.peak_largest_kib / 2**10,
        "summary": summary,
        "log": str(work / "run.log"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
