"""``python -m simulation [--num-supernodes N] [--run-config "key=value ..."]``: one simulated run.

The run configuration is checked here, before Flower sees it, so a misspelt key or a bad value ends with one line
naming the key (and, for an unknown key, the closest known ones) and exit code 2. So do a split of the training set
that cannot be drawn over the SuperNodes, and a population or cohort whose estimated peak memory exceeds what the
machine has available (``simulation.memory_check``; not checked on an existing Ray cluster, whose memory is
elsewhere), and a ``--ray-address`` where nothing listens (``simulation.ray_address``).

The checks need the app's settings, models and datasets, and with them torch. Once they pass, the command replaces
itself (``exec``: the same process, terminal and signals) with ``python -m simulation --checked``, which only
supervises the run (SuperLink, ``flwr run``, the final status) and never imports torch: a launcher that kept torch
for the whole run held 0.27 GiB of the default run's peak memory.

``--in-process`` runs the ServerApp against the ClientApp's handlers in this one process instead
(``simulation/in_process.py``: no Ray, no SuperLink, the clients answer one after another), after the same checks
but the memory estimate, which models Flower's engine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from run_config.settings import ConfigError
from run_config.text import parse_overrides
from simulation.local_run import Resources, add_placement_arguments, exit_on_sigterm, run_simulation
from simulation.ray_address import check_ray_address

#: The flag of the supervising process: the checks have passed.
CHECKED = "--checked"


def check(args: argparse.Namespace, memory: bool = True) -> None:
    """Raise ``ConfigError`` for a bad run config, a split that cannot be drawn over the SuperNodes, a population that
    cannot run, a memory need beyond the machine or a ``--ray-address`` where nothing listens."""
    check_ray_address(args.ray_address)  # first, before torch's import: Ray would retry for minutes
    # Imported here, not above: they import torch, which the supervising process does without.
    from methods.registry import config_with_overrides, generic_dataset, method
    from run_config.data_check import check_data, check_split
    from server_app.pretraining import check_source
    from simulation.memory_check import check_memory
    from strategies.population_check import check_population

    config = config_with_overrides(args.run_config)
    check_data(config, generic_dataset(config))
    check_source(config)
    check_population(config, args.num_supernodes)
    if (check_run := method(config.method).check_run) is not None:  # e.g. a generic set larger than its source
        check_run(config, args.num_supernodes)
    if memory and not args.ray_address:  # not for an in-process run, whose memory the estimate does not model
        check_memory(config, args.num_supernodes, args.cpus_per_client, args.gpus_per_client)
    check_split(config, args.num_supernodes)  # last: the one check that may decode the dataset (seconds)


def engine_options(args: argparse.Namespace) -> list[str]:
    """The options given that only Flower's engine uses."""
    given = {
        "--cpus-per-client": args.cpus_per_client != 1,
        "--gpus-per-client": args.gpus_per_client != 0,
        "--ray-address": bool(args.ray_address),
        "--flwr-home": args.flwr_home is not None,
    }
    return [option for option, set_ in given.items() if set_]


def run_here(overrides: dict[str, Any], num_supernodes: int) -> int:
    """The whole run with the in-process engine; 0 when it completed, 1 (with the reason) when it failed."""
    # Imported here, as in ``check``: the supervising process of an engine run never imports torch.
    from run_config.defaults import load_defaults
    from simulation.in_process import kills_the_runner, run_in_process

    run_config = {**load_defaults(), **overrides}
    if kills_the_runner(run_config):
        print("error: fail-partitions 'die' kills the client's process, with --in-process this one", file=sys.stderr)
        return 2
    try:
        run_in_process(run_config, num_supernodes)
    except Exception as err:  # the run's own log has the details; the exit status says it failed
        print(f"error: the run failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulation", description=__doc__.splitlines()[0])
    parser.add_argument("--num-supernodes", type=int, default=10, help="simulated clients (default 10)")
    parser.add_argument("--cpus-per-client", type=int, default=1, help="Ray CPUs per ClientApp (default 1)")
    add_placement_arguments(parser)
    parser.add_argument(
        "--run-config", default="", help="overrides, e.g. \"num-server-rounds=5 dataset='fashion-mnist'\""
    )
    parser.add_argument(
        "--flwr-home",
        type=lambda path: Path(path).resolve(),
        help="the Flower folder of this run (its SuperLink's state, superlink.log), kept; default: a fresh folder "
        "under .flwr-home/, removed after a completed run",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run in this process with the in-process engine (no Ray, no SuperLink; clients one after another)",
    )
    parser.add_argument(CHECKED, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_process and (ignored := engine_options(args)):
        parser.error(f"{', '.join(ignored)} set Flower's engine up; --in-process has none")
    try:
        overrides = parse_overrides(args.run_config)
        if not args.checked:
            check(args, memory=not args.in_process)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.in_process:
        return run_here(overrides, args.num_supernodes)
    if not args.checked and argv is None:  # from the command line: hand the run to a process without torch
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "simulation", *sys.argv[1:], CHECKED])
    resources = Resources(args.cpus_per_client, args.gpus_per_client, args.ray_address)
    return run_simulation(overrides, num_supernodes=args.num_supernodes, resources=resources, flwr_home=args.flwr_home)


if __name__ == "__main__":
    exit_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the run's processes were stopped on the way out (local_run.py)
        print(
            "stopped (Ctrl-C): the run goes on with the run-name and resume=true that the log gave at its start",
            file=sys.stderr,
        )
        sys.exit(130)
