"""Forward-only passes of WRN-16-1 by batch size: seconds, peak memory, and whether the outputs depend on it.

    python -m benchmarks.eval_batch_size [--threads 1 2] [--images 2000] [--repeats 5]

The forward-only passes (``eval-batch-size``: central evaluation, the entropy pass, building the feature cache) run
φ (stem, groups 1-2: the 32×32 and 16×16 activations) and the whole model over many images. For each torch thread
count, in a fresh process, each batch size runs ``--repeats`` times in alternating order over the same random
images; reported are the median seconds, the images per second, and whether the logits and φ(x) equal those of
batches of 500 bit for bit. The peak resident memory a pass adds (``VmHWM`` above the resident size before it) is
measured once per pass and batch size, each in a fresh process of its own, since freed memory a process keeps
would hide it.
Writes ``measurements/benchmarks/eval_batch_size.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks import RESULTS_DIR

RESULTS = RESULTS_DIR / "eval_batch_size.json"
BATCH_SIZES = (32, 64, 128, 256, 500)
REFERENCE = 500


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current resident size


@torch.no_grad()
def _pass(forward: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, batch_size: int) -> torch.Tensor:
    outputs = [forward(images[i : i + batch_size]) for i in range(0, len(images), batch_size)]
    return torch.cat(outputs) if batch_size == REFERENCE else outputs[-1]


def measure(threads: int, images: int, repeats: int) -> dict:
    """Every batch size at ``threads`` torch threads (inside a fresh process)."""
    from models import build_model

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    model = build_model("wrn-16-1", 1, 10, 0.3).eval()
    x = torch.randn(images, 1, 32, 32)
    passes: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "phi": lambda b: model.forward_to(b, "mid"),
        "whole": model,
    }
    with torch.no_grad():
        reference = {name: _pass(f, x, REFERENCE) for name, f in passes.items()}
    seconds: dict[str, dict[int, list[float]]] = {name: {b: [] for b in BATCH_SIZES} for name in passes}
    for repeat in range(repeats):
        for batch_size in BATCH_SIZES if repeat % 2 == 0 else tuple(reversed(BATCH_SIZES)):
            for name, forward in passes.items():
                tick = time.perf_counter()
                _pass(forward, x, batch_size)
                seconds[name][batch_size].append(time.perf_counter() - tick)
    same = {}
    with torch.no_grad():
        for name, forward in passes.items():
            for batch_size in BATCH_SIZES:
                outputs = torch.cat([forward(x[i : i + batch_size]) for i in range(0, images, batch_size)])
                same[f"{name}:{batch_size}"] = bool(torch.equal(outputs, reference[name]))
    rows = []
    for name in passes:
        for batch_size in BATCH_SIZES:
            median = statistics.median(seconds[name][batch_size])
            rows.append(
                {
                    "pass": name,
                    "threads": threads,
                    "batch_size": batch_size,
                    "median_seconds": median,
                    "images_per_second": images / median,
                    "equal_to_batches_of_500": same[f"{name}:{batch_size}"],
                }
            )
    return {"threads": threads, "images": images, "repeats": repeats, "rows": rows}


def peak_mib(threads: int, images: int, name: str, batch_size: int) -> float:
    """The resident memory one pass adds at its peak (inside a fresh process)."""
    from models import build_model

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    model = build_model("wrn-16-1", 1, 10, 0.3).eval()
    forward = model if name == "whole" else (lambda b: model.forward_to(b, "mid"))
    x = torch.randn(images, 1, 32, 32)
    _reset_peak()
    start_mib = _status_mib("VmRSS")
    with torch.no_grad():
        for i in range(0, images, batch_size):
            forward(x[i : i + batch_size])
    return _status_mib("VmHWM") - start_mib


def _child(*args: str) -> str:
    command = [sys.executable, "-m", "benchmarks.eval_batch_size", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # thread count: time in this process
    parser.add_argument("--peak", nargs=3, help=argparse.SUPPRESS)  # threads pass batch: one peak, this process
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.images, args.repeats)))
        return 0
    if args.peak is not None:
        threads, name, batch_size = args.peak
        print(json.dumps(peak_mib(int(threads), args.images, name, int(batch_size))))
        return 0
    results = []
    for threads in args.threads:
        result = json.loads(_child("--one", str(threads), "--images", str(args.images), "--repeats", str(args.repeats)))
        for row in result["rows"]:
            peak = _child("--peak", str(threads), row["pass"], str(row["batch_size"]), "--images", str(args.images))
            row["peak_mib_above_start"] = json.loads(peak)
        results.append(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"results": results}, indent=1) + "\n")
    print("| pass | threads | batch | median s | images/s | peak MiB a pass adds | same as 500 |")
    print("|---|---|---|---|---|---|---|")
    for result in results:
        for r in result["rows"]:
            print(
                f"| {r['pass']} | {r['threads']} | {r['batch_size']} | {r['median_seconds']:.3f} "
                f"| {r['images_per_second']:,.0f} | {r['peak_mib_above_start']:.0f} | {r['equal_to_batches_of_500']} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
