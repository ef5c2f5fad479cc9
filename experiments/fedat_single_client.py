"""FedAT's single-client ablations (thesis §5.4.1, Tables 5.1–5.4 and Fig. 5.9), one command:

    python -m experiments.fedat_single_client [--dataset fashion-mnist-mini] [--out measurements/experiments/...]

The training set is split between the server's generic data D_g and one client's data D_1: IID (D_g a random 20%,
D_1 the other 80%) and non-IID (D_g every image of classes 0–8; D_1 all of class 9 plus a share of classes 0–8,
which overlaps D_g as it must in the thesis). A global model is trained on D_g and a smaller client model on D_1
(Table 5.1; with the app's pretraining recipe: warm-up and cosine decay, BatchNorm statistics re-estimated, the
best epoch on a held-out tenth, so that both start well trained); then FedAT's server steps (``methods/fedat.py``)
run one after another on copies of the global model: step 1 alone (AT from the client, Table 5.2); and for
metadata from each level, step 2 (θ on the client's feature maps) and step 3 with and without AT (Fig. 5.9,
Tables 5.3–5.4). Test accuracy on all classes and on class 9 after
each. Results go to ``results.json`` and ``results.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data.catalog import DATASETS
from data.loading import load_dataset
from data.transforms import to_model_input
from methods.fedat import AT_LEVELS, global_copy, train_server_step
from methods.model_outputs import extract_in_batches
from models import SplitModel, build_model
from models.training import cross_entropy_of, evaluate, train_epochs
from run_config import parse_run_config
from run_config.defaults import load_defaults
from server_app.pretraining import pretrain

#: The thesis's server steps: SGD lr 0.1; AT 2 epochs, metadata 2 epochs; β = 1,000.
STEP: dict[str, Any] = {"lr": 0.1, "batch_size": 64, "momentum": 0.9, "weight_decay": 5e-4}
AT_EPOCHS, METADATA_EPOCHS = 2, 2


def split_generic(labels: np.ndarray, scenario: str, client_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(D_g, D_1) positions in the training set for ``iid`` or ``non-iid``."""
    rng = np.random.default_rng(seed)
    if scenario == "iid":
        order = rng.permutation(len(labels))
        cut = len(labels) // 5
        return np.sort(order[:cut]), np.sort(order[cut:])
    generic = np.flatnonzero(labels != 9)
    others = np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), int(client_share * (labels == c).sum()), replace=False)
            for c in range(9)
        ]
    )
    return generic, np.sort(np.concatenate([np.flatnonzero(labels == 9), others]))


def scores(model: SplitModel, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Test accuracy on all classes and on class 9."""
    model.eval()
    nine = y == 9
    return {
        "all": 100 * evaluate(model, x, y, 500)[1],
        "class9": 100 * evaluate(model, x[nine], y[nine], 500)[1],
    }


def baseline(model: SplitModel, data: Any, rows: np.ndarray, args: argparse.Namespace) -> SplitModel:
    """A Table 5.1 baseline: ``model`` trained on ``rows`` of the training set with the pretraining recipe."""
    config = parse_run_config(
        {**load_defaults(), "dataset": args.dataset, "pretrain-epochs": args.epochs, "seed": args.seed}
    )
    pretrain(model, data.train.subset(rows), args.dataset, config, torch.device("cpu"))
    return model


def fit(model: SplitModel, x: torch.Tensor, y: torch.Tensor, epochs: int, seed: int) -> SplitModel:
    """``epochs`` of the server steps' SGD on all of ``model`` (the "D_g only" control of Table 5.2)."""
    train_epochs(
        cross_entropy_of(model.train()),
        list(model.parameters()),
        x,
        y,
        epochs=epochs,
        generator=torch.Generator().manual_seed(seed),
        **STEP,
    )
    return model


def scenario_results(
    scenario: str, data: Any, info: Any, args: argparse.Namespace, test: tuple[torch.Tensor, torch.Tensor]
) -> dict[str, Any]:
    generic, client = split_generic(data.train.labels, scenario, args.client_share, args.seed)
    images = to_model_input(data.train.images, info)
    labels = torch.from_numpy(data.train.labels)
    gx, gy, cx, cy = images[generic], labels[generic], images[client], labels[client]
    torch.manual_seed(args.seed)
    global_model = baseline(build_model(args.global_model, info.channels, info.num_classes), data, generic, args)
    client_model = baseline(build_model(args.client_model, info.channels, info.num_classes), data, client, args)
    out: dict[str, Any] = {
        "sizes": {"generic": len(generic), "client": len(client)},
        "table5.1": {"global on D_g": scores(global_model, *test), "client on D_1": scores(client_model, *test)},
    }
    gen = torch.Generator().manual_seed(args.seed)
    step1 = global_copy(global_model)
    train_server_step(step1, 1, "up", gx, gy, teacher=client_model, epochs=AT_EPOCHS, generator=gen, **STEP)
    out["table5.2"] = {"step 1 (AT on D_g)": scores(step1, *test)}
    trained_on_generic = global_copy(global_model)
    fit(trained_on_generic, gx, gy, AT_EPOCHS, args.seed)
    out["table5.2"]["D_g only, same epochs"] = scores(trained_on_generic, *test)
    for level in AT_LEVELS:
        metadata = extract_in_batches(client_model, cx, level, 500)
        after2 = global_copy(step1)
        train_server_step(after2, 2, level, metadata, cy, epochs=METADATA_EPOCHS, generator=gen, **STEP)
        row = {"step 2": scores(after2, *test)}
        for name, levels in (("step 3 with AT", AT_LEVELS), ("step 3 without AT", ())):
            after3 = global_copy(after2)
            train_server_step(
                after3,
                3,
                level,
                gx,
                gy,
                teacher=client_model,
                epochs=AT_EPOCHS,
                at_levels=levels,
                generator=gen,
                **STEP,
            )
            row[name] = scores(after3, *test)
        out[f"metadata at {level}"] = row
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = ["| scenario | model / step | acc. all (%) | acc. class 9 (%) |", "|---|---|---|---|"]
    for scenario, parts in results["scenarios"].items():
        for part, rows in parts.items():
            if part == "sizes":
                continue
            for name, s in rows.items():
                lines.append(f"| {scenario} | {part}: {name} | {s['all']:.2f} | {s['class9']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.fedat_single_client", description=__doc__)
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--global-model", default="wrn-16-1")
    parser.add_argument("--client-model", default="wrn-10-1")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the Table 5.1 baselines")
    parser.add_argument("--client-share", type=float, default=0.2, help="non-IID: share of classes 0-8 in D_1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", nargs="+", default=["iid", "non-iid"])
    parser.add_argument("--out", type=Path, default=Path("measurements/experiments/fedat-single-client"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    info = DATASETS[args.dataset]
    data = load_dataset(args.dataset)
    test = (to_model_input(data.test.images, info), torch.from_numpy(data.test.labels))
    tick = time.perf_counter()
    results: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "scenarios": {}}
    for scenario in args.scenarios:
        results["scenarios"][scenario] = scenario_results(scenario, data, info, args, test)
        print(scenario, json.dumps(results["scenarios"][scenario]), flush=True)
    results["seconds"] = time.perf_counter() - tick
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(markdown(results))
    print(f"wrote {args.out}/results.json and results.md ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
