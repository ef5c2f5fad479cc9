"""Wall time, peak memory and accuracy of the default federated run (``make run``).

    python -m benchmarks.default_run [--num-supernodes 10] [--cold]

Runs ``python -m simulation``'s code path with the default configuration and samples, every 0.5 s, the
resident memory of every process of the run (SuperLink, SuperExec, the ServerApp with Ray's driver, Ray's
own processes and the ClientApp actors: all processes whose environment names the run's FLWR_HOME).
``--cold`` uses an empty pretraining cache, so the time includes pretraining.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import threading
import time
from pathlib import Path

from simulation.local_run import run_simulation


def run_processes(flwr_home: Path) -> list[Path]:
    needle = str(flwr_home).encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                found.append(entry)
        except OSError:
            continue
    return found


def rss_bytes(proc: Path) -> int:
    try:
        for line in (proc / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-supernodes", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="pretrain from scratch (empty cache)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/default_run.json"))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fedft-bench-"))
    flwr_home = work / "flwr-home"
    overrides: dict[str, object] = {"results-dir": str(work / "results"), "run-name": "default"}
    if args.cold:
        overrides["pretrain-cache-dir"] = str(work / "pretrained")
    peak = {"total": 0, "largest": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            sizes = [rss_bytes(p) for p in run_processes(flwr_home)]
            peak["total"] = max(peak["total"], sum(sizes))
            peak["largest"] = max(peak["largest"], max(sizes, default=0))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    tick = time.perf_counter()
    with (work / "run.log").open("wb") as log:
        code = run_simulation(overrides, num_supernodes=args.num_supernodes, flwr_home=flwr_home, stream_to=log)
    wall = time.perf_counter() - tick
    done.set()
    sampler.join()
    log_text = (work / "run.log").read_text(errors="replace")
    pretrain = re.search(r"pretraining took ([0-9.]+) s", log_text)
    summary = json.loads((work / "results" / "default" / "summary.json").read_text()) if code == 0 else {}
    report = {
        "exit_code": code,
        "num_supernodes": args.num_supernodes,
        "cold_pretraining_cache": args.cold,
        "wall_seconds": wall,
        "pretraining_seconds": float(pretrain.group(1)) if pretrain else 0.0,
        "peak_rss_total_mb": peak["total"] / 2**20,
        "peak_rss_largest_process_mb": peak["largest"] / 2**20,
        "summary": summary,
        "log": str(work / "run.log"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
