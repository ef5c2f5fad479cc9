"""``python -m simulation [--num-supernodes N] [--run-config "key=value ..."]``: one simulated run.

The run configuration is checked here, before Flower sees it, so a misspelt key or a bad value ends with one line
naming the key (and, for an unknown key, the closest known ones) and exit code 2. So does a population or cohort
whose estimated peak memory exceeds what the machine has available (``simulation.memory_check``; not checked on an
existing Ray cluster, whose memory is elsewhere).
"""

from __future__ import annotations

import argparse
import sys

from run_config import ConfigError
from run_config.overrides import config_with_overrides, parse_overrides
from run_config.population import check_population
from simulation.local_run import Resources, add_placement_arguments, exit_on_sigterm, run_simulation
from simulation.memory_check import check_memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulation", description=__doc__.splitlines()[0])
    parser.add_argument("--num-supernodes", type=int, default=10, help="simulated clients (default 10)")
    parser.add_argument("--cpus-per-client", type=int, default=1, help="Ray CPUs per ClientApp (default 1)")
    add_placement_arguments(parser)
    parser.add_argument(
        "--run-config", default="", help="overrides, e.g. \"num-server-rounds=5 dataset='fashion-mnist'\""
    )
    args = parser.parse_args(argv)
    try:
        config = config_with_overrides(args.run_config)
        check_population(config, args.num_supernodes)
        overrides = parse_overrides(args.run_config)
        if not args.ray_address:
            check_memory(config, args.num_supernodes, args.cpus_per_client, args.gpus_per_client)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    resources = Resources(args.cpus_per_client, args.gpus_per_client, args.ray_address)
    return run_simulation(overrides, num_supernodes=args.num_supernodes, resources=resources)


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
