"""The pfl side-by-side benchmark's job file: what pfl is handed is the app's split, weights, cohorts and batches.

pfl itself is not installed in the app's environment; ``benchmarks/pfl_job.py`` must import without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from benchmarks import pfl_job
from benchmarks.pfl_side_by_side import JOB, export, job_for, state_checksum
from client_app.local_update import round_seed
from data.catalog import DATASETS
from data.transforms import normalise
from models import LeNet5


def test_the_job_file_holds_the_apps_split_weights_cohorts_and_batch_orders(tmp_path: Path) -> None:
    overrides = {**job_for(20), "dataset": "synthetic", "num-server-rounds": 3, "data-cache-dir": ""}
    info = export(tmp_path / "job.npz", overrides, 20)
    job = np.load(tmp_path / "job.npz")
    settings = json.loads(str(job["settings"]))
    assert settings["batch_size"] == JOB["batch-size"] and settings["local_epochs"] == 1
    # the weights: pfl_job's LeNet-5 takes the app's state dict strictly, with the same checksum and outputs
    names = json.loads(str(job["init_names"]))
    state = {name: torch.from_numpy(job[f"init_{i}"]) for i, name in enumerate(names)}
    mine = pfl_job.LeNet5(in_channels=1, num_classes=4)
    mine.load_state_dict(state, strict=True)
    assert pfl_job.state_checksum(mine.state_dict()) == str(job["init_sha256"]) == info["init_sha256"]
    torch.manual_seed(0)
    app = LeNet5(in_channels=1, num_classes=4)
    app.load_state_dict(state)
    assert state_checksum(app.state_dict()) == info["init_sha256"]
    x = torch.randn(5, 1, 32, 32)
    assert torch.equal(mine(x), app(x))
    # the split: every training sample in exactly one partition (IID, no hold-out)
    positions, offsets = job["client_positions"], job["client_offsets"]
    assert len(offsets) == 21 and sorted(positions.tolist()) == list(range(len(job["train_labels"])))
    # cohorts: 10 of the 20 a round, distinct, as the app's random selection draws them
    cohorts = job["cohorts"]
    assert cohorts.shape == (3, 10) and all(len(set(c)) == 10 for c in cohorts.tolist())
    # batch orders: what the app's local update draws for (seed, round, partition)
    first = int(cohorts[0, 0])
    size = int(offsets[first + 1] - offsets[first])
    expected = torch.randperm(size, generator=torch.Generator().manual_seed(round_seed(0, 1, first))).numpy()
    assert np.array_equal(job["orders"][job["order_offsets"][0] : job["order_offsets"][1]], expected)
    # the inputs: pfl_job normalises as the app does
    images = job["train_images"][:4]
    assert torch.equal(
        pfl_job.normalise(images, job["mean"], job["std"], bool(job["pad_to_32"])),
        normalise(torch.from_numpy(images), DATASETS["synthetic"]),
    )
