"""FedAT's first round in the Table 5.7 setting, one server step at a time (a diagnostic, on the CPU):

    python -m experiments.fedat_round_steps FOLDER CELL [--set KEY=VALUE ...] [--classes 0,5,8] [--out FILE.jsonl]

``CELL`` names a recorded FedAT cell of the results folder ``FOLDER`` (in its archive or its cell folders): its
``config.json`` gives the run config (keys added since take their defaults). The global model is the run's initial
model (``server_app.pretraining.initial_state``, its cache included); each client model is built as the server builds
it (``fedat.client-init``: the global model reduced to the client's architecture, or fresh from (seed, partition)) and
trained as the client trains it (E epochs of the whole model at the run's learning rate); its metadata are its feature
maps at the metadata level.
Then, on fresh copies of the global model, with the server steps' settings (``methods/fedat/attention_transfer.py``):
steps 1, 2 and 3 in order (test accuracy after each), and controls: step 1 with β = 0 (cross-entropy on D_g alone); step
2 alone, also scored after θ's BatchNorm statistics are re-estimated on D_g through the global φ (no weight changes: can
θ's weights, trained on the client's maps, read φ_g's once its statistics are those of φ_g's maps?); and step 2 alone on
the *global* model's maps of the same samples. Last, the size-weighted mean of the three-step copies (the round's
new global model, before the client refinement). One JSON line per result; with ``--classes``, each accuracy also
per listed class (key ``<result>_classes``: Table 5.8 asks which step the classes absent from D_g are lost in).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from client_app.local_data import load_local_data
from data.catalog import DATASETS
from data.loading import load_dataset
from data.transforms import to_model_input
from experiments.cell_archive import recorded_cells
from methods.common.client_models import ServerTrainingSettings, architecture_of, build_architecture
from methods.common.generic_data import GenericDataSettings, load_generic_data, parse_classes
from methods.common.metadata_level import MetadataLevelSettings
from methods.fedat.attention_transfer import (
    aggregate_global_copies,
    global_copy,
    inherit_from_global,
    train_server_step,
)
from methods.fedat.method import FedATSettings
from methods.registry import parse_config
from models import SplitModel
from models.batchnorm import settle_batchnorm
from models.outputs import extract_in_batches
from models.training import accuracy_per_class, cross_entropy_of, logit_scores, predict_logits, train_epochs
from run_config import federated_split
from run_config.defaults import load_defaults
from server_app.pretraining import initial_state

CPU = torch.device("cpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.fedat_round_steps", description=__doc__)
    parser.add_argument("folder", type=Path, help="an experiment's results folder")
    parser.add_argument("cell", help="the name of one of its recorded FedAT cells")
    parser.add_argument("--clients", type=int, default=5, help="the cell's number of clients")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a run-config entry (JSON value)"
    )
    parser.add_argument(
        "--classes", type=parse_classes, default=(), help="also score these classes one by one, e.g. 0,5,8"
    )
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cells = recorded_cells(args.folder)
    if args.cell not in cells:
        parser.error(f"{args.folder} records no finished cell {args.cell!r}")
    raw = {**load_defaults(), **cells[args.cell].config}  # keys added since: their defaults
    for entry in args.set:
        key, _, value = entry.partition("=")
        raw[key] = json.loads(value)
    config = parse_config(raw)
    info, split = DATASETS[config.dataset], federated_split(config)
    if any(not 0 <= c < info.num_classes for c in args.classes):
        parser.error(f"--classes: {config.dataset} has classes 0-{info.num_classes - 1}")
    level = config.settings(MetadataLevelSettings).metadata_level
    server = config.settings(ServerTrainingSettings)
    fedat = config.settings(FedATSettings)

    def step(
        model: SplitModel,
        number: Literal[1, 2, 3],
        inputs: torch.Tensor,
        labels: torch.Tensor,
        generator: torch.Generator,
        teacher: SplitModel | None = None,
        beta: float = fedat.at_beta,
    ) -> None:
        """One server step with the run's settings (steps 1 and 3: AT epochs and lr; step 2: metadata's)."""
        metadata = number == 2
        train_server_step(
            model,
            number,
            level,
            inputs,
            labels,
            teacher=teacher,
            epochs=fedat.metadata_epochs if metadata else fedat.at_epochs,
            lr=fedat.metadata_learning_rate if metadata else fedat.at_learning_rate,
            batch_size=server.server_batch_size,
            momentum=server.server_momentum,
            weight_decay=server.server_weight_decay,
            beta=beta,
            at_levels=fedat.attention_levels,
            generator=generator,
        )

    test = load_dataset(config.dataset).test
    tx, ty = to_model_input(test.images, info), torch.from_numpy(test.labels)
    lines: list[dict[str, Any]] = []

    def score(line: dict[str, Any], key: str, model: SplitModel) -> None:
        """``line[key]``: test accuracy (%); with ``--classes``, ``line[key + "_classes"]``: each listed class's."""
        model.eval()
        logits = predict_logits(model, tx, config.eval_batch_size)
        line[key] = round(100 * logit_scores(logits, ty)[1], 1)
        if args.classes:
            per_class = accuracy_per_class(logits.argmax(dim=1), ty, info.num_classes)
            line[key + "_classes"] = {
                str(c): None if (value := per_class[c]) is None else round(100 * value, 1) for c in args.classes
            }

    def emit(line: dict[str, Any]) -> None:
        lines.append(line)
        print(json.dumps(line), flush=True)

    global_model = build_architecture(config, config.model)
    global_model.load_state_dict(initial_state(config))
    start: dict[str, Any] = {"global model": "pretrained"}
    score(start, "accuracy", global_model)
    emit(start)
    generic = load_generic_data(split, config.settings(GenericDataSettings))
    gx, gy = generic.inputs, generic.labels
    copies, sizes = [], []
    for pid in range(args.clients):
        seed = int(np.random.SeedSequence([config.seed, pid, 0xC11E]).generate_state(1)[0])
        client = build_architecture(config, architecture_of(config, pid), seed)
        if fedat.client_init == "global":
            client.load_state_dict(inherit_from_global(client.state_dict(), global_model.state_dict()))
        local = load_local_data(split, pid, args.clients, None)
        x, y = local.rows(CPU, torch.arange(len(local))), local.labels
        client.train()
        loss = train_epochs(
            cross_entropy_of(client),
            list(client.parameters()),
            x,
            y,
            epochs=config.local_epochs,
            batch_size=config.batch_size,
            lr=config.learning_rate,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            generator=torch.Generator().manual_seed(seed),
        )
        maps = extract_in_batches(client, x, level, config.eval_batch_size)
        own_maps = extract_in_batches(global_model, x, level, config.eval_batch_size)
        gen = torch.Generator().manual_seed(seed)
        row: dict[str, Any] = {
            "partition": pid,
            "architecture": architecture_of(config, pid),
            "label_counts": np.bincount(y.numpy(), minlength=info.num_classes).tolist(),
            "client_train_loss": round(float(loss), 3),
        }
        score(row, "client_accuracy", client)
        model = global_copy(global_model)
        step(model, 1, gx, gy, gen, client)
        score(row, "after_step1", model)
        step(model, 2, maps, y, gen)
        score(row, "after_step2", model)
        step(model, 3, gx, gy, gen, client)
        score(row, "after_step3", model)
        copies.append({k: v.clone() for k, v in model.state_dict().items()})
        sizes.append(len(y))
        control = global_copy(global_model)
        step(control, 1, gx, gy, gen, client, beta=0.0)
        score(row, "step1_beta0_only", control)
        control = global_copy(global_model)
        step(control, 2, maps, y, gen)
        score(row, "step2_only", control)
        settle_batchnorm(control, gx, within=control.upper_stages(level), batch_size=server.server_batch_size)
        score(row, "step2_only_statistics_on_d_g", control)
        control = global_copy(global_model)
        step(control, 2, own_maps, y, gen)
        score(row, "step2_only_global_maps", control)
        emit(row)
    global_model.load_state_dict(aggregate_global_copies(copies, sizes))
    mean: dict[str, Any] = {"global model": "size-weighted mean of the three-step copies"}
    score(mean, "accuracy", global_model)
    emit(mean)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
