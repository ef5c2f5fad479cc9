"""Centralised training on the pooled client data: the upper bound of the papers' tables.

    python -m server_app.centralised [--epochs 30] [--num-partitions 10] [--run-config "key=value ..."]

It uses the app's configuration (pyproject defaults plus overrides), starts from the same initial weights
as the federated methods (``pretrain``), trains the whole model on the union of all clients' training
data (the server's public split stays out, as in federated runs) and evaluates on the test set after
every epoch. Results are written in the federated format (one ``rounds.jsonl`` line per epoch,
``method = "centralised"``), so the same tools read them.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch
from flwr.common.logger import log

from data.federated import load_client_partition, load_test_set
from data.image_data import ImageData
from data.transforms import random_crop_flip, to_model_input
from methods.registry import config_with_overrides
from models.batchnorm import settle_batchnorm
from models.device import compute_description, resolve_device
from models.training import cross_entropy_of, evaluate, train_epochs
from run_config import RunConfig, build_model_for, federated_split
from server_app.pretraining import check_source, initial_state
from server_app.results import RunRecorder, run_directory
from server_app.run_lock import RunFolderError, lock_run_folder

METHOD = "centralised"
#: Pooled samples whose statistics the BatchNorm layers take after each epoch (as many as pretraining's).
SETTLE_SAMPLES = 4096


def pooled_training_data(config, num_partitions: int) -> ImageData:
    """The union of every client's partition."""
    split = federated_split(config)
    parts = [load_client_partition(split, pid, num_partitions) for pid in range(num_partitions)]
    return ImageData(np.concatenate([p.images for p in parts]), np.concatenate([p.labels for p in parts]))


def train_pooled(config: RunConfig, epochs: int, num_partitions: int, directory: Path, device: torch.device) -> dict:
    """Train on the pooled data for ``epochs`` on ``device``, evaluating after each, with results in ``directory``."""
    split = federated_split(config)
    pool, test = pooled_training_data(config, num_partitions), load_test_set(split)
    inputs, labels = to_model_input(pool.images, split.info).to(device), torch.from_numpy(pool.labels).to(device)
    test_inputs = to_model_input(test.images, split.info).to(device)
    test_labels = torch.from_numpy(test.labels).to(device)
    model = build_model_for(config)
    model.load_state_dict(initial_state(config, device))
    model.to(device)
    recorder = RunRecorder(directory, config, method=METHOD, machine=compute_description(device))
    recorder.evaluated(0, *evaluate(model.eval(), test_inputs, test_labels, config.eval_batch_size))
    generator = torch.Generator().manual_seed(config.seed)
    # BatchNorm statistics are settled on a fixed, seeded sample of the pool after every epoch (models/batchnorm.py)
    settle_rows = torch.randperm(len(labels), generator=torch.Generator().manual_seed(config.seed))[:SETTLE_SAMPLES]
    settle_inputs = inputs[settle_rows.to(device)]
    for epoch in range(1, epochs + 1):
        recorder.round_started(epoch, [], 0)
        tick = time.perf_counter()
        model.train()
        loss = train_epochs(
            cross_entropy_of(model),
            list(model.parameters()),
            inputs,
            labels,
            epochs=1,
            batch_size=config.batch_size,
            lr=config.learning_rate,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            generator=generator,
            augment=random_crop_flip if config.augment else None,
        )
        settle_batchnorm(model, settle_inputs, batch_size=config.eval_batch_size)
        seconds = time.perf_counter() - tick
        stats = {
            "partition_id": -1,
            "num_examples": len(labels),
            "num_local": len(labels),
            "train_loss": loss,
            "train_seconds": seconds,
        }
        recorder.replies_received(epoch, [stats], 0)
        model.eval()
        test_loss, accuracy = evaluate(model, test_inputs, test_labels, config.eval_batch_size)
        recorder.evaluated(epoch, test_loss, accuracy)
    return recorder.finish({k: v.cpu() for k, v in model.state_dict().items()})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m server_app.centralised", description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--num-partitions", type=int, default=10, help="clients whose data is pooled (default 10)")
    parser.add_argument("--run-config", default="", help="overrides, as for flwr run")
    args = parser.parse_args(argv)
    try:
        config = config_with_overrides(args.run_config)
        device = resolve_device(config.server_device, key="run config 'server-device'")
    except ValueError as err:
        parser.error(str(err))
    check_source(config)
    torch.set_flush_denormal(True)
    directory = run_directory(config, method=METHOD)
    try:
        lock = lock_run_folder(directory, config.results_dir, resume=False, resumable=False)
    except RunFolderError as err:
        parser.exit(1, f"cannot start the run: {err}\n")
    with lock:
        return train_pooled(config, args.epochs, args.num_partitions, directory, device)


if __name__ == "__main__":
    logging.getLogger("flwr").setLevel(logging.INFO)
    log(logging.INFO, "%s", main())
