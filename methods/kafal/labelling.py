"""Who reveals labels to a KAFAL client: its labeller (``pools.Oracle``: local indices -> labels).

A client knows no label until its labeller gives it: the initial random draw and every query go through it, and
nothing else in the method reads a label (``ActivePool`` asks it only for samples being labelled).

- In simulation (no ``data-path``) the labeller is the dataset itself: the partition's own labels, read one query at
  a time.
- On a deployed node (``data-path`` = its folder, see ``data/node_data.py``) the labeller is ``LabelsFile``: every
  request is first appended to ``al-queries.jsonl`` in that folder (one line per request: the local indices, so an
  operator sees which samples were asked for), then the labels are read from the folder's ``labels.npy`` at those
  indices. An operator labelling on demand writes the answers into ``labels.npy`` (same row order as
  ``images.npy``); rows never asked for are never read, so they may hold any placeholder class.

Another labeller (a person at a prompt, a labelling service) is any callable with the same signature, returned by
``labeller_for``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from data.node_data import LABELS_FILE
from methods.kafal.pools import Oracle

if TYPE_CHECKING:
    from client_app.node import Node

QUERIES_FILE = "al-queries.jsonl"


def dataset_labeller(labels: torch.Tensor) -> Oracle:
    """The simulation's oracle: the partition's own labels at the asked indices."""
    held = labels.detach().cpu().long()
    return lambda indices: held[indices.long()].clone()


class LabelsFile:
    """A deployed node's labeller: logs each request to ``al-queries.jsonl``, then reads ``labels.npy`` there."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, indices: torch.Tensor) -> torch.Tensor:
        asked = indices.long().cpu()
        with (self.folder / QUERIES_FILE).open("a") as handle:
            handle.write(json.dumps({"indices": asked.tolist()}) + "\n")
        labels = np.load(self.folder / LABELS_FILE, mmap_mode="r", allow_pickle=False)
        return torch.from_numpy(np.asarray(labels[asked.numpy()], dtype=np.int64))


def labeller_for(node: Node, labels: torch.Tensor) -> Oracle:
    """The labeller of a node: ``LabelsFile`` in its ``data-path`` folder when deployed, else the dataset's labels
    (``labels``, the partition's; the only place the method reads them)."""
    if node.data_path:
        return LabelsFile(Path(node.data_path).expanduser())
    return dataset_labeller(labels)
