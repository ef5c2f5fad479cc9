"""``python -m deployment.export_partitions``: one data folder per SuperNode, cut as a run would cut it.

The split (dataset, partitioner, α, public fraction, seed, …) comes from the app's run config with the
``--run-config`` overrides, so the exported partitions are exactly those the simulation uses. Copy
``node-<i>/`` to device ``i`` and start its SuperNode with
``--node-config 'partition-id=<i> num-partitions=<N> data-path="<folder>"'``; the format is described in
``data/node_data.py``. The server keeps the held-out public split and the test set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data.file_formats import DataFormatError
from data.loading import DataNotFoundError
from data.node_data import export_partitions
from methods.registry import config_with_overrides
from run_config import federated_split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deployment.export_partitions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write node-<i>/ folders into")
    parser.add_argument("--num-partitions", type=int, required=True, help="number of SuperNodes")
    parser.add_argument(
        "--run-config", default="", help="overrides, e.g. \"dataset='fashion-mnist' dirichlet-alpha=0.5\""
    )
    args = parser.parse_args(argv)
    try:
        config = config_with_overrides(args.run_config)
    except ValueError as err:
        parser.error(str(err))
    try:
        folders = export_partitions(federated_split(config), args.num_partitions, args.out)
    except (DataNotFoundError, DataFormatError) as err:  # the dataset is not on this machine, or unreadable
        print(f"error: {err}", file=sys.stderr)
        return 1
    for folder in folders:
        pid = int(folder.name.split("-")[1])
        node_config = f'partition-id={pid} num-partitions={args.num_partitions} data-path="{folder.resolve()}"'
        print(f"{folder}: --node-config '{node_config}'")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
