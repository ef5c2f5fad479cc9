"""``python -m experiments cka``: how far clients' locally updated models drift apart, with and without
pretraining (the FedFT-EDS paper's Fig. 2–4).

Every client runs one FedAvg local update (the whole model, all its data, ``local-epochs`` epochs) from the
same initial global model; then the linear CKA between every pair of updated models is computed at each
split level of the model (WRN: low, mid, up) on the test set, batch by batch, and averaged. A higher
similarity means less client drift. Writes ``cka.json`` and ``cka_heatmaps.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from client_app.local_data import load_local_data  # noqa: E402
from client_app.local_update import local_update  # noqa: E402
from data.federated import load_test_set  # noqa: E402
from data.transforms import to_model_input  # noqa: E402
from experiments.cka import cka_matrix, mean_off_diagonal  # noqa: E402
from methods.registry import config_with_overrides  # noqa: E402
from models import SplitModel  # noqa: E402
from models.device import resolve_device  # noqa: E402
from run_config import RunConfig, build_model_for, federated_split  # noqa: E402
from server_app.pretraining import check_source, initial_state  # noqa: E402


def client_models(config: RunConfig, num_clients: int, device: torch.device) -> list[SplitModel]:
    """Each client's model after one local update from the initial global model (round 1), on ``device``."""
    split, state = federated_split(config), initial_state(config, device)
    models = []
    for partition_id in range(num_clients):
        model = build_model_for(config)
        model.load_state_dict(state)
        local_update(
            model,
            load_local_data(split, partition_id, num_clients),
            config,
            server_round=1,
            partition_id=partition_id,
            learning_rate=config.learning_rate,
            device=device,
        )
        models.append(model.eval())
    return models


@torch.no_grad()
def level_similarity(models: list, inputs: torch.Tensor, batch_size: int) -> dict[str, np.ndarray]:
    """Split level -> models × models CKA of the representations at that level, averaged over batches."""
    levels = models[0].levels
    batches = [inputs[i : i + batch_size] for i in range(0, len(inputs), batch_size)]
    return {level: cka_matrix([[m.forward_to(b, level) for m in models] for b in batches]) for level in levels}


def plot_heatmaps(results: dict[str, dict[str, np.ndarray]], path: Path) -> Path:
    """Rows: initial models (e.g. pretrained, not pretrained); columns: levels; darker = more similar."""
    rows, levels = list(results), list(next(iter(results.values())))
    figure, axes = plt.subplots(len(rows), len(levels), figsize=(3.6 * len(levels), 3.2 * len(rows)), squeeze=False)
    for r, setting in enumerate(rows):
        for c, level in enumerate(levels):
            matrix = results[setting][level]
            image = axes[r][c].imshow(matrix, cmap="Blues", vmin=0.0, vmax=1.0)
            axes[r][c].set_title(f"{setting}, {level} (mean {mean_off_diagonal(matrix):.2f})", fontsize=9)
            axes[r][c].set_xticks(range(len(matrix)))
            axes[r][c].set_yticks(range(len(matrix)))
            axes[r][c].set_xlabel("client")
            axes[r][c].set_ylabel("client")
    figure.colorbar(image, ax=axes, shrink=0.8, label="linear CKA")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments cka", description=__doc__.splitlines()[0])
    parser.add_argument("--run-config", default="", help="overrides of the app's defaults, as for flwr run")
    parser.add_argument("--pretrain", nargs="+", default=["public", "none"], help="initial models to compare")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--test-samples", type=int, default=1000, help="first N test images (0 = all)")
    parser.add_argument("--batch-size", type=int, default=500, help="inputs per CKA batch")
    parser.add_argument("--out", type=Path, default=Path("results/cka"))
    args = parser.parse_args(argv)
    torch.set_flush_denormal(True)
    results, report = {}, {}
    for pretrain in args.pretrain:
        try:
            config = config_with_overrides(f"{args.run_config} method=fedavg pretrain={pretrain}")
            device = resolve_device(config.server_device, key="run config 'server-device'")
            check_source(config)
        except ValueError as err:
            parser.error(str(err))
        tick = time.perf_counter()
        split = federated_split(config)
        test = load_test_set(split)
        count = args.test_samples or len(test.labels)
        inputs = to_model_input(test.images[:count], split.info).to(device)
        models = client_models(config, args.clients, device)
        results[f"pretrain={pretrain}"] = level_similarity(models, inputs, args.batch_size)
        report[f"pretrain={pretrain}"] = {
            level: {"mean_off_diagonal": mean_off_diagonal(m), "matrix": m.round(6).tolist()}
            for level, m in results[f"pretrain={pretrain}"].items()
        }
        print(
            f"pretrain={pretrain}: "
            + ", ".join(f"{level} {v['mean_off_diagonal']:.3f}" for level, v in report[f"pretrain={pretrain}"].items())
            + f" ({time.perf_counter() - tick:.0f} s)",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "run_config": args.run_config,
        "clients": args.clients,
        "test_samples": count,
        "batch_size": args.batch_size,
    }
    (args.out / "cka.json").write_text(json.dumps({**meta, "results": report}, indent=1) + "\n")
    print(f"wrote {plot_heatmaps(results, args.out / 'cka_heatmaps.png')} and {args.out / 'cka.json'}")
    return 0
