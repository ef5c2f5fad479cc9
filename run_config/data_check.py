"""The datasets a run reads, checked at its start: by the launcher before Flower's engine starts, and by the
ServerApp before it waits for nodes. A missing folder or dataset is one line naming the key; a found one is named
with where it is read from, so the log says which folder each dataset came from. Where the number of clients is
known before the start (the launcher, an experiment's cells), the split of the training set over them is drawn
too: a split that cannot be made is one line naming its keys, not a refusal from every node once they have started.
A user's own data (``data/own_data.py``) is decoded and checked here (once per machine with ``data-cache-dir``): a
folder with one class, images of several sizes, an unreadable file or no image is one line naming the folder.
"""

from __future__ import annotations

from data.federated import partition_sizes
from data.file_formats import DataFormatError
from data.loading import DataNotFoundError, data_dir_problem, where_from
from data.own_data import describe_info, is_own_dataset
from data.partitioning import PartitioningError, SplitDrawError
from run_config.derived import data_cache, dataset_info, federated_split
from run_config.schema import ConfigError, RunConfig


def datasets_of(config: RunConfig, generic_dataset: str | None = None) -> dict[str, str]:
    """Run-config key -> the dataset the run reads through it: the task's, pretraining's other source, and the
    generic set's (``generic_dataset``, for the methods that draw D_g from another dataset)."""
    datasets = {"dataset": config.dataset}
    if config.pretrain == "dataset":
        datasets["pretrain-dataset"] = config.pretrain_dataset
    if generic_dataset is not None:
        datasets["common.generic-dataset"] = generic_dataset
    return datasets


def check_data(config: RunConfig, generic_dataset: str | None = None) -> list[str]:
    """Lines naming where each dataset of the run is read from; ``ConfigError`` naming the key when ``data-dir`` is
    no readable folder or a dataset is in none of the places searched."""
    problem = data_dir_problem(config.data_dir)
    if problem:
        raise ConfigError(f"{problem}: set it to the folder holding the dataset's files, or leave it empty")
    lines = []
    for key, name in datasets_of(config, generic_dataset).items():
        try:
            line = f"{key} {name!r} is read from {where_from(name, config.data_dir)}"
            if is_own_dataset(name):
                line += f": {describe_info(dataset_info(config, name))}"
        except DataNotFoundError as err:
            raise ConfigError(f"run config {key!r} = {name!r}: {err}") from None
        except DataFormatError as err:
            raise ConfigError(f"run config {key!r}: {err}") from None
        lines.append(line)
    return lines


def check_split(config: RunConfig, num_clients: int) -> None:
    """``ConfigError`` when the training set cannot be split over ``num_clients`` clients as configured (a Dirichlet
    draw no attempt satisfies, a ``min-partition-size`` beyond the data). The draw is seeded, so it is the run's own
    split; with a ``data-cache-dir`` its processes on this machine share, they read it from there rather than draw
    it again (processes elsewhere, or without that folder, draw the same split themselves)."""
    try:
        partition_sizes(federated_split(config), num_clients, data_cache(config))
    except SplitDrawError as err:
        raise ConfigError(f"run config: {err} Lower 'min-partition-size' or raise 'dirichlet-alpha'.") from None
    except PartitioningError as err:
        raise ConfigError(f"run config: {err}") from None
