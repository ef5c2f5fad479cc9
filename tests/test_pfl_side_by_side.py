"""The pfl side-by-side benchmark's job file: what pfl is handed is the app's split, weights, cohorts and batches.

pfl itself is not installed in the app's environment; ``benchmarks/pfl_job.py`` must import without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
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


def test_the_fedft_eds_job_file_holds_the_apps_round_1_selections_and_pfl_job_makes_the_same(tmp_path: Path) -> None:
    overrides = {**job_for(20, "fedft-eds"), "dataset": "synthetic", "num-server-rounds": 2, "data-cache-dir": ""}
    overrides["pretrain"] = "none"
    export(tmp_path / "job.npz", overrides, 20)
    job = np.load(tmp_path / "job.npz")
    settings = json.loads(str(job["settings"]))
    assert (settings["method"], settings["freeze"], settings["temperature"]) == ("fedft-eds", "mid", 0.1)
    positions, offsets, cohorts = job["client_positions"], job["client_offsets"], job["cohorts"]
    size = settings["selection_size"]
    assert size == 4  # ⌈0.1 x 40⌉ of each client's 40 synthetic samples
    # batch orders: a permutation of the selected rows, drawn as the app's local update draws it
    first = int(cohorts[0, 0])
    expected = torch.randperm(size, generator=torch.Generator().manual_seed(round_seed(0, 1, first))).numpy()
    assert np.array_equal(job["orders"][: job["order_offsets"][1]], expected)
    # pfl_job's φ, θ and entropy ranking pick the rows the app's functions picked at export
    names = json.loads(str(job["init_names"]))
    whole = pfl_job.LeNet5(in_channels=1, num_classes=4)
    whole.load_state_dict({name: torch.from_numpy(job[f"init_{i}"]) for i, name in enumerate(names)})
    upper = pfl_job.Upper(whole, "mid")
    assert [n for n, _ in upper.named_parameters()] == [
        "stages.0.0.weight",
        "stages.0.0.bias",
        "stages.0.2.weight",
        "stages.0.2.bias",
        "stages.1.weight",
        "stages.1.bias",
    ]
    at = job["first_selection_offsets"]
    for slot, pid in enumerate(cohorts[0].tolist()):
        local = positions[offsets[pid] : offsets[pid + 1]]
        x = pfl_job.normalise(job["train_images"][local], job["mean"], job["std"], bool(job["pad_to_32"]))
        h = pfl_job.lower_features(whole, "mid", x, 64).to(torch.float16)
        chosen = pfl_job.entropy_selection(upper, h, size, 0.1, 64)
        assert chosen.tolist() == job["first_selections"][at[slot] : at[slot + 1]].tolist()
    # and they are the highest-entropy rows: the top entropy beats every row left out
    logits = upper(h.float()).detach()
    entropy = pfl_job.hardened_entropy(logits, 0.1)
    left_out = torch.ones(len(h), dtype=torch.bool)
    left_out[chosen] = False
    assert entropy[chosen].min() >= entropy[left_out].max()


def test_the_export_refuses_a_job_it_cannot_hand_to_pfl(tmp_path: Path) -> None:
    overrides = {**job_for(20, "fedft-eds"), "dataset": "synthetic", "data-cache-dir": "", "pretrain": "none"}
    with pytest.raises(ValueError, match="one local epoch of FedAvg on all local data or of FedFT-EDS"):
        export(tmp_path / "job.npz", {**overrides, "method": "fedft-rds"}, 20)
    with pytest.raises(ValueError, match="cached once in float16, without augmentation"):
        export(tmp_path / "job.npz", {**overrides, "feature-cache-dtype": "float32"}, 20)
