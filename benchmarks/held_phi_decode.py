"""What decoding a node's held φ once per process saves when a message builds the global model.

    python -m benchmarks.held_phi_decode [--models lenet5 wrn-16-1] [--pairs 3] [--calls 40]

``Node.global_model`` (``client_app/node.py``) builds the model from the received θ and the φ the node keeps in
``context.state``. For each model (split at ``mid``), alternating in each pair: φ decoded from the node's state at
every message (``to_torch_state_dict``, as before ``DecodedFrozenParts``) and decoded once (``DECODED_FROZEN``); the
median milliseconds of ``--calls`` messages carrying θ alone, one thread. Writes
``measurements/benchmarks/held_phi_decode.json`` and prints a Markdown table (medians over the pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

import client_app.node as node_module
from methods.registry import CATALOGUE, OBJECTIVES
from protocol.messages import ARRAYS, FROZEN, TRAIN
from run_config import build_model_for
from run_config.defaults import load_defaults
from strategies.partial_model import split_state

OUT = Path(__file__).resolve().parents[1] / "measurements" / "benchmarks" / "held_phi_decode.json"


class DecodedEveryMessage(node_module.DecodedFrozenParts):
    """The former path: the held φ decoded at every message."""

    def get(self, fingerprint: str, held: ArrayRecord) -> dict[str, torch.Tensor]:
        return held.to_torch_state_dict()


def message_seconds(model: str, decoded: node_module.DecodedFrozenParts, calls: int) -> float:
    """Median seconds of ``Node.global_model`` for a θ-only message, φ held from an earlier one."""
    node_module.DECODED_FROZEN = decoded
    context = Context(
        run_id=1,
        node_id=1,
        node_config={"partition-id": 0, "num-partitions": 1},
        state=RecordDict(),
        run_config={**load_defaults(), "model": model, "freeze": "mid"},
    )
    node = node_module.Node(context, CATALOGUE, OBJECTIVES)
    full = build_model_for(node.config, seed=0)
    phi, theta = split_state(full.state_dict(), full.upper_state_keys("mid"))
    node.global_model(Message(RecordDict({ARRAYS: ArrayRecord(theta), FROZEN: ArrayRecord(phi)}), 1, TRAIN))
    message = Message(RecordDict({ARRAYS: ArrayRecord(theta)}), 1, TRAIN)
    seconds = []
    for _ in range(calls):
        tick = time.perf_counter()
        node.global_model(message)
        seconds.append(time.perf_counter() - tick)
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.held_phi_decode", description=__doc__)
    parser.add_argument("--models", nargs="+", default=["lenet5", "wrn-16-1"])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1  # messages are made inside a run
    rows = []
    for model in args.models:
        every, once = [], []
        for _ in range(args.pairs):
            every.append(message_seconds(model, DecodedEveryMessage(), args.calls))
            once.append(message_seconds(model, node_module.DecodedFrozenParts(), args.calls))
        rows.append(
            {
                "model": model,
                "decoded_every_message_ms": [round(1e3 * s, 3) for s in every],
                "decoded_once_ms": [round(1e3 * s, 3) for s in once],
                "median_every_ms": round(1e3 * statistics.median(every), 3),
                "median_once_ms": round(1e3 * statistics.median(once), 3),
            }
        )
    OUT.write_text(json.dumps({"load_after": [round(x, 2) for x in os.getloadavg()], "rows": rows}, indent=2) + "\n")
    print("| model | φ decoded every message (ms) | φ decoded once (ms) | saved per message (ms) |")
    print("|---|---|---|---|")
    for row in rows:
        every_ms, once_ms = row["median_every_ms"], row["median_once_ms"]
        print(f"| {row['model']} | {every_ms:.2f} | {once_ms:.2f} | {every_ms - once_ms:.2f} |")


if __name__ == "__main__":
    main()
