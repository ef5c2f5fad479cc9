"""Forward-only scoring in the default (NCHW) layout against channels-last, for the app's CNNs.

    python -m benchmarks scoring-layout [--device cpu] [--images 4000] [--repeats 7] [--threads 1] [--out FILE]

For each model (LeNet-5, ResNet-8 and WRN-16-1, each on 1-channel input as Fashion-MNIST's and on 3-channel input
as CIFAR's) the same weights score the same random 32×32 images in batches of 64 (the app's default
``eval-batch-size``) in both layouts, in alternating order, ``--repeats`` times; reported are the median seconds of
each, their ratio, the largest difference between the two layouts' logits and the share of equal predictions.
Then the app's central evaluator on the pfl side-by-side job, in its layout and in NCHW. This is the measurement
behind ``models.memory_layout``. Writes ``--out`` (default
``measurements/benchmarks/scoring_layout[_<device>].json``) and prints a Markdown table.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord

from benchmarks import RESULTS_DIR, command_line
from benchmarks.pfl_side_by_side import CLIENTS, job_for
from methods.registry import parse_config
from models.device import compute_description, resolve_device, synchronize
from models.memory_layout import to_channels_last
from models.registry import build_model
from models.training import predict_logits
from run_config import build_model_for
from run_config.defaults import load_defaults
from strategies.central_evaluation import CentralEvaluation

NAME = "scoring-layout"
MODELS = (("lenet5", 1), ("lenet5", 3), ("resnet8", 1), ("resnet8", 3), ("wrn-16-1", 1), ("wrn-16-1", 3))
BATCH_SIZE = 64


def _seconds(model: torch.nn.Module, images: torch.Tensor, device: torch.device) -> float:
    start = time.perf_counter()
    predict_logits(model, images, BATCH_SIZE)
    synchronize(device)
    return time.perf_counter() - start


def measure(name: str, channels: int, device: torch.device, images: int, repeats: int) -> dict[str, object]:
    """One model's medians in both layouts, alternating, and how far apart their logits are."""
    torch.manual_seed(0)
    plain = build_model(name, channels, 10).to(device).eval()
    channels_last = to_channels_last(copy.deepcopy(plain))
    inputs = torch.randn(images, channels, 32, 32, device=device)
    expected, got = predict_logits(plain, inputs, BATCH_SIZE), predict_logits(channels_last, inputs, BATCH_SIZE)
    times: dict[str, list[float]] = {"nchw": [], "channels_last": []}
    for repeat in range(repeats):
        order = ("nchw", "channels_last") if repeat % 2 == 0 else ("channels_last", "nchw")
        for layout in order:
            model = plain if layout == "nchw" else channels_last
            times[layout].append(_seconds(model, inputs, device))
    nchw, last = statistics.median(times["nchw"]), statistics.median(times["channels_last"])
    return {
        "model": name,
        "channels": channels,
        "images": images,
        "nchw_seconds": times["nchw"],
        "channels_last_seconds": times["channels_last"],
        "nchw_median": nchw,
        "channels_last_median": last,
        "ratio": last / nchw,
        "max_logit_difference": float((got - expected).abs().max()),
        "equal_predictions": float((got.argmax(1) == expected.argmax(1)).float().mean()),
    }


def measure_evaluator(device: torch.device, repeats: int) -> dict[str, object]:
    """The app's central evaluator on the pfl side-by-side job (LeNet-5 from its seeded weights, the 10,000
    Fashion-MNIST test images, batches of 64): one scoring (``with_classes``) in the evaluator's layout against the
    same evaluator with its weights put back to NCHW, alternating."""
    config = parse_config({**load_defaults(), **job_for(CLIENTS, "fedavg")})
    evaluation = CentralEvaluation(config, {}, device)
    theta = ArrayRecord(build_model_for(config).state_dict())
    scoring_layout = {name: p.data for name, p in evaluation.model.named_parameters()}
    nchw = {name: t.to(memory_format=torch.contiguous_format) for name, t in scoring_layout.items()}
    times: dict[str, list[float]] = {"nchw": [], "channels_last": []}
    results: dict[str, tuple[float, float]] = {}
    for repeat in range(repeats):
        order = ("nchw", "channels_last") if repeat % 2 == 0 else ("channels_last", "nchw")
        for layout in order:
            weights = nchw if layout == "nchw" else scoring_layout
            for name, parameter in evaluation.model.named_parameters():
                parameter.data = weights[name]
            start = time.perf_counter()
            loss, accuracy, _ = evaluation.with_classes(theta)
            synchronize(device)
            times[layout].append(time.perf_counter() - start)
            results[layout] = (loss, accuracy)
    plain, last = statistics.median(times["nchw"]), statistics.median(times["channels_last"])
    return {
        "what": "CentralEvaluation.with_classes, pfl job (LeNet-5, Fashion-MNIST test set, eval-batch-size 64)",
        "nchw_seconds": times["nchw"],
        "channels_last_seconds": times["channels_last"],
        "nchw_median": plain,
        "channels_last_median": last,
        "ratio": last / plain,
        "loss_and_accuracy": results,
    }


def _machine(machine: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in machine.items() if key in ("device", "cpu", "torch", "threads"))


def table(result: dict[str, Any]) -> str:
    """A recorded result as a Markdown table, with the evaluator's line."""
    columns = ("model", "input channels", "NCHW (s)", "channels-last (s)", "ratio", "max logit difference")
    lines = ["| " + " | ".join((*columns, "equal predictions")) + " |", "|" + "---|" * (len(columns) + 1)]
    for row in result["models"]:
        lines.append(
            f"| {row['model']} | {row['channels']} | {row['nchw_median']:.3f} | {row['channels_last_median']:.3f} | "
            f"{row['ratio']:.2f}× | {row['max_logit_difference']:.1e} | {row['equal_predictions']:.4f} |"
        )
    evaluator = result["evaluator"]
    lines += [
        "",
        f"The app's evaluator on the pfl job: {evaluator['nchw_median']:.3f} s NCHW, "
        f"{evaluator['channels_last_median']:.3f} s in its layout ({evaluator['ratio']:.2f}×). "
        f"`{result['command']}`, {result['when']}, {_machine(result['machine'])}, load {result['load_before']:.2f}.",
    ]
    return "\n".join(lines)


def recorded_figure() -> str:
    return table(json.loads((RESULTS_DIR / "scoring_layout.json").read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = command_line(NAME, __doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="default: scoring_layout[_<device type>].json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    load = os.getloadavg()[0]
    rows = [measure(name, channels, device, args.images, args.repeats) for name, channels in MODELS]
    evaluator = measure_evaluator(device, args.repeats)
    result = {
        "command": f"python -m benchmarks {NAME} --device {args.device} --images {args.images} "
        f"--repeats {args.repeats} --threads {args.threads}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": compute_description(device),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "models": rows,
        "evaluator": evaluator,
    }
    suffix = "" if device.type == "cpu" else f"_{device.type}"
    out = args.out or RESULTS_DIR / f"scoring_layout{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\n{args.images} images, batches of {BATCH_SIZE}, {args.threads} thread(s); wrote {out}")
    return 0
