"""Why every trained model's BatchNorm statistics are settled (``models/batchnorm.py``): the evidence, measured.

    python -m benchmarks.batchnorm_scoring [--run-config "key=value ..."] [--clients 10]

From the run configuration's start (cached pretraining), each of ``--clients`` Dir(α) clients trains the whole
model for ``local-epochs`` on all its data (FedAvg's update, dropout on) and the test set scores its model three ways:

- ``as trained``: with the running statistics training left (an exponential average over the last steps, with
  dropout on before the second BatchNorm of every WRN block): how trained models were scored before the rule;
- ``settled``: with the statistics settled on the client's data, dropout off: the rule;
- ``as trained, after 2 passes``: as trained, after two training-mode forward passes over 500 of the client's
  images that change no weight (what an evaluation in training mode does to a model).

Both aggregates (the weighted mean of the clients' states, as FedAvg aggregates) are scored too, and every settled
model is scored twice (the two scores must be equal). Writes ``measurements/benchmarks/batchnorm_scoring.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from benchmarks import RESULTS_DIR
from data.federated import load_client_partition, load_test_set
from data.transforms import to_model_input
from methods.common.state_averaging import average_states
from methods.registry import config_with_overrides
from models.batchnorm import settle_batchnorm
from models.device import compute_description
from models.training import cross_entropy_of, evaluate, train_epochs
from run_config import build_model_for, federated_split
from server_app.pretraining import initial_state

CPU = torch.device("cpu")
OUTPUT = RESULTS_DIR / "batchnorm_scoring.json"


def scored(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor) -> float:
    return evaluate(model.eval(), inputs, labels, 500)[1]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-config", default="", help="overrides of the default run configuration")
    parser.add_argument("--clients", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    config = config_with_overrides(args.run_config)
    split = federated_split(config)
    test = load_test_set(split)
    test_inputs, test_labels = to_model_input(test.images, split.info), torch.from_numpy(test.labels)
    start = initial_state(config)
    model = build_model_for(config)
    model.load_state_dict(start)
    start_accuracy = scored(model, test_inputs, test_labels)
    rows, trained_states, settled_states, sizes = [], [], [], []
    tick = time.perf_counter()
    for pid in range(args.clients):
        data = load_client_partition(split, pid, args.clients)
        inputs, labels = to_model_input(data.images, split.info), torch.from_numpy(data.labels)
        model.load_state_dict(start)
        model.train()
        torch.manual_seed(pid)
        train_epochs(
            cross_entropy_of(model),
            list(model.parameters()),
            inputs,
            labels,
            epochs=config.local_epochs,
            batch_size=config.batch_size,
            lr=config.learning_rate,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            generator=torch.Generator().manual_seed(pid),
        )
        trained = {k: v.clone() for k, v in model.state_dict().items()}
        as_trained = scored(model, test_inputs, test_labels)
        with torch.no_grad():
            model.train()
            for _ in range(2):
                model(inputs[:500])
        after_passes = scored(model, test_inputs, test_labels)
        model.load_state_dict(trained)
        settle_batchnorm(model, inputs)
        settled = scored(model, test_inputs, test_labels)
        rows.append(
            {
                "partition_id": pid,
                "samples": len(labels),
                "as_trained": as_trained,
                "as_trained_after_2_passes": after_passes,
                "settled": settled,
                "settled_rescored": scored(model, test_inputs, test_labels),
            }
        )
        trained_states.append(trained)
        settled_states.append({k: v.clone() for k, v in model.state_dict().items()})
        sizes.append(float(len(labels)))
        print(json.dumps(rows[-1]), flush=True)
    model.load_state_dict(average_states(trained_states, sizes))
    aggregate_as_trained = scored(model, test_inputs, test_labels)
    model.load_state_dict(average_states(settled_states, sizes))
    aggregate_settled = scored(model, test_inputs, test_labels)
    result = {
        "command": "python -m benchmarks.batchnorm_scoring"
        + (f" --run-config {args.run_config!r}" if args.run_config else ""),
        "config": {
            "model": config.model,
            "dropout": config.dropout,
            "dataset": config.dataset,
            "pretrain": config.pretrain,
            "local_epochs": config.local_epochs,
            "clients": args.clients,
        },
        "start_accuracy": start_accuracy,
        "clients": rows,
        "aggregate_as_trained": aggregate_as_trained,
        "aggregate_settled": aggregate_settled,
        "seconds": time.perf_counter() - tick,
        "machine": compute_description(CPU),
    }
    OUTPUT.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"start {start_accuracy:.4f}; aggregate as trained {aggregate_as_trained:.4f}, settled {aggregate_settled:.4f}"
    )
    return result


if __name__ == "__main__":
    main()
