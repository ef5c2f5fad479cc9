"""Settings that can only be checked against the number of clients K (known to the launcher and the server)."""

from __future__ import annotations

from run_config.schema import ConfigError, RunConfig
from strategies.fedentopt_selection import buffer_capacity
from strategies.random_selection import cohort_size
from strategies.robust_aggregation import AggregationSettings, settings_problem
from strategies.stragglers import straggler_count


def aggregation_settings(config: RunConfig) -> AggregationSettings:
    """The configured ``aggregation`` rule and its parameters."""
    return AggregationSettings(
        config.aggregation,
        config.clip_multiple,
        config.weight_cap_multiple,
        config.trim_fraction,
        config.byzantine_clients,
    )


def check_population(config: RunConfig, num_clients: int) -> None:
    """Refuse, naming the keys and what to set, a configuration that cannot run with ``num_clients`` clients."""
    per_round = cohort_size(num_clients, config.fraction_train)
    slow = 0 if config.straggler_work == "partial" else straggler_count(per_round, config.straggler_fraction)
    delivering = per_round - slow
    problem = settings_problem(aggregation_settings(config), delivering)
    if problem:  # Krum needs n ≥ 2f + 3, Bulyan n ≥ 4f + 3, a trimmed mean must trim someone
        raise ConfigError(
            f"{problem} ({num_clients} clients, fraction-train {config.fraction_train}, "
            f"straggler-fraction {config.straggler_fraction})"
        )
    if delivering < config.min_train_nodes:
        raise ConfigError(
            f"run config 'min-train-nodes' = {config.min_train_nodes} exceeds the {delivering} clients that deliver "
            f"each round ({num_clients} clients, fraction-train {config.fraction_train}, straggler-fraction "
            f"{config.straggler_fraction}): every round would be skipped"
        )
    if config.client_selection != "fedentopt":
        return
    capacity = buffer_capacity(config.fedentopt_buffer, num_clients)
    if not 0 < capacity <= num_clients - per_round:
        raise ConfigError(
            f"run config 'fedentopt-buffer' = {config.fedentopt_buffer} gives a buffer of Q = {capacity} clients, but "
            f"FedEntOpt needs 1 ≤ Q ≤ K − M = {num_clients - per_round} ({num_clients} clients, {per_round} per round "
            f"with 'fraction-train' = {config.fraction_train}): set 'fraction-train' below 1 (the paper uses 0.1) and "
            f"'fedentopt-buffer' to at most 1 − fraction-train (the paper uses 0.5 or 0.7)"
        )
