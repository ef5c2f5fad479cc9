"""Build data/assets/fashion_mnist_mini.json: a class-balanced subset of Fashion-MNIST.

    python scripts/make_fashion_mnist_mini.py [--source /usr/share/datasets/fashion-mnist]

Takes the first ``--train-per-class`` training and ``--test-per-class`` test images of every class,
in the files' order, so the result depends only on the source files. The arrays are stored as a
compressed .npz, base85-encoded inside JSON: Flower app bundles (FABs) carry only .py, .toml, .md, .json
and .yaml files, and the mini set must travel with the app to every node.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data.catalog import DATASETS  # noqa: E402
from data.file_formats import read_idx_pair  # noqa: E402
from data.image_data import ImageData  # noqa: E402
from data.loading import MINI_FILE  # noqa: E402


def first_per_class(data: ImageData, per_class: int) -> ImageData:
    keep = np.sort(np.concatenate([np.flatnonzero(data.labels == c)[:per_class] for c in np.unique(data.labels)]))
    return data.subset(keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--train-per-class", type=int, default=600)
    parser.add_argument("--test-per-class", type=int, default=100)
    args = parser.parse_args()
    info = DATASETS["fashion-mnist"]
    train = read_idx_pair(args.source / "train-images-idx3-ubyte.gz", args.source / "train-labels-idx1-ubyte.gz", info)
    test = read_idx_pair(args.source / "t10k-images-idx3-ubyte.gz", args.source / "t10k-labels-idx1-ubyte.gz", info)
    train, test = first_per_class(train, args.train_per_class), first_per_class(test, args.test_per_class)
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        train_images=train.images,
        train_labels=train.labels.astype(np.uint8),
        test_images=test.images,
        test_labels=test.labels.astype(np.uint8),
    )
    asset = {
        "description": f"Fashion-MNIST subset: first {args.train_per_class} train / {args.test_per_class} test images "
        "per class",
        "licence": "MIT, Copyright (c) 2017 Zalando SE; full text in LICENSE-fashion-mnist.md beside this file",
        "encoding": "numpy .npz (savez_compressed), base85",
        "npz_base85": base64.b85encode(buffer.getvalue()).decode("ascii"),
    }
    MINI_FILE.write_text(json.dumps(asset))
    print(f"wrote {MINI_FILE} ({MINI_FILE.stat().st_size / 1e6:.1f} MB): {len(train)} train, {len(test)} test images")


if __name__ == "__main__":
    main()
