"""Aggregation rules that one hostile client cannot take over, as pure functions on NumPy arrays.

A validated reply can still carry chosen values: an update scaled ×100, a sign-flipped one, finite values
of 1e20, or a ``num-examples`` inflated ×1000. FedAvg's weighted mean lets any of them move the global
model anywhere. Every rule here works on the clients' updates Δ_k = θ_k − θ_global over the floating-point
arrays (in float64, so even 1e20 values have finite norms) and returns θ_global + the aggregated update:

- ``clipped-mean`` (the default): each ‖Δ_k‖₂ is clipped to ``clip-multiple`` × the round's median norm,
  each weight (``num-examples``) capped at ``weight-cap-multiple`` × the median weight, then the weighted
  mean. Both multiples default to 1.0: a hostile client then counts like the median client at most. Looser
  bounds (2.0) let one scaled or 1e20 update of eight cost FedFT-EDS up to 31 points, while 1.0 cost honest
  runs nothing measurable at Dir(0.1) or Dir(0.5) (``measurements/benchmarks/attacks.md``).
- ``median``: the coordinate-wise median (as Flower's FedMedian), unweighted.
- ``trimmed-mean``: the coordinate-wise mean without the ``trim-fraction`` lowest and highest values
  (Flower's ``trim_mean``), unweighted.
- ``krum`` / ``multi-krum``: the update(s) with the smallest summed squared distance to their n − f − 2
  nearest neighbours (Flower's ``select_multikrum``, f = ``byzantine-clients``); Multi-Krum keeps m = n − f
  and takes their mean weighted by the capped weights.
- ``bulyan``: Multi-Krum keeps n − 2f, then per coordinate the mean of the n − 4f values closest to their
  median (Flower's ``aggregate_n_closest_weights``); needs n ≥ 4f + 3.

``mean`` (plain FedAvg, for reproducing the papers) is not computed here: the strategy keeps Flower's
``aggregate_arrayrecords`` for it, bit for bit. Integer arrays (BatchNorm's ``num_batches_tracked``) are
never averaged as floats: every rule here takes their element-wise lower median over the clients, which
keeps their dtype and cannot be moved by one client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from flwr.app import Array, ArrayRecord, RecordDict
from flwr.serverapp.strategy.bulyan import aggregate_n_closest_weights
from flwr.serverapp.strategy.fedtrimmedavg import trim_mean
from flwr.serverapp.strategy.multikrum import select_multikrum

from protocol.replies import ArraySpec
from run_config.choices import AGGREGATION_RULES, CLIPPED_MEAN, MAX_TRIM_FRACTION, MEAN

Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class AggregationSettings:
    """The ``aggregation`` rule and its parameters, as the run config names them."""

    rule: str = CLIPPED_MEAN
    clip_multiple: float = 1.0
    weight_cap_multiple: float = 1.0
    trim_fraction: float = 0.2
    byzantine_clients: int = 1


DEFAULT_AGGREGATION = AggregationSettings()


@dataclass
class RobustAggregate:
    """The new global arrays and what the rule did to whom (positions in the list of replies)."""

    arrays: dict[str, np.ndarray]
    clipped: list[int] = field(default_factory=list)  # updates scaled down to the norm bound
    weight_capped: list[int] = field(default_factory=list)  # weights lowered to the cap
    selected: list[int] = field(default_factory=list)  # Krum family: the updates that were kept
    median_update_norm: float | None = None

    def report(self, ids: Sequence[int]) -> dict[str, object]:
        """The fields for rounds.jsonl, with positions replaced by ``ids`` (partition ids)."""
        fields: dict[str, object] = {}
        if self.median_update_norm is not None:
            fields.update(
                median_update_norm=self.median_update_norm,
                clipped=[ids[i] for i in self.clipped],
                weight_capped=[ids[i] for i in self.weight_capped],
            )
        if self.selected:
            fields["selected"] = sorted(ids[i] for i in self.selected)
        return fields


def min_clients(settings: AggregationSettings) -> int:
    """The fewest updates the rule can aggregate: Krum needs n ≥ 2f + 3, Bulyan n ≥ 4f + 3, others one."""
    f = settings.byzantine_clients
    if settings.rule in ("krum", "multi-krum"):
        return 2 * f + 3
    if settings.rule == "bulyan":
        return 4 * f + 3
    return 1


def settings_problem(settings: AggregationSettings, cohort: int) -> str | None:
    """Why these settings cannot aggregate a round of ``cohort`` updates, naming the run-config key; or None."""
    rule, f = settings.rule, settings.byzantine_clients
    if rule not in AGGREGATION_RULES:
        return f"run config 'aggregation' = {rule!r} is invalid: it must be one of {', '.join(AGGREGATION_RULES)}"
    multiples = (("clip-multiple", settings.clip_multiple), ("weight-cap-multiple", settings.weight_cap_multiple))
    for key, value in multiples:
        if not value > 0:
            return f"run config '{key}' = {value!r} is invalid: it must be > 0"
    if rule == "trimmed-mean":
        beta = settings.trim_fraction
        if not 0 <= beta < MAX_TRIM_FRACTION:
            return (
                f"run config 'trim-fraction' = {beta!r} is invalid: it must be in [0, 0.5), so that at least "
                "one client is left after trimming that share from each end"
            )
        if int(beta * cohort) == 0:
            return (
                f"run config 'trim-fraction' = {beta!r} trims no client of a round of {cohort} "
                f"(⌊{beta} · {cohort}⌋ = 0), so 'trimmed-mean' would be the plain mean; "
                f"it needs at least {1 / cohort:.3g}"
            )
    if rule in ("krum", "multi-krum", "bulyan"):
        if f < 0:
            return f"run config 'byzantine-clients' = {f} is invalid: it must be >= 0"
        needed = min_clients(settings)
        if cohort < needed:
            formula = "4f + 3" if rule == "bulyan" else "2f + 3"
            return (
                f"run config 'byzantine-clients' = {f} is too many for 'aggregation' = {rule!r} with "
                f"{cohort} clients per round: it needs at least {formula} = {needed}"
            )
    return None


def is_float(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating)


def client_updates(client_arrays: Sequence[Arrays], global_arrays: Arrays) -> list[dict[str, np.ndarray]]:
    """Δ_k = θ_k − θ_global over the floating-point arrays, in float64."""
    keys = [key for key, value in global_arrays.items() if is_float(value)]
    base = {key: global_arrays[key].astype(np.float64) for key in keys}
    return [{key: arrays[key].astype(np.float64) - base[key] for key in keys} for arrays in client_arrays]


def update_norms(updates: Sequence[Arrays]) -> np.ndarray:
    """‖Δ_k‖₂ over all of a client's arrays together."""
    return np.array([np.sqrt(sum(float(np.vdot(v, v)) for v in update.values())) for update in updates])


def clip_factors(norms: np.ndarray, multiple: float) -> np.ndarray:
    """min(1, bound / ‖Δ_k‖) with bound = ``multiple`` × the median norm: the factor each update is scaled by."""
    bound = multiple * float(np.median(norms))
    return np.array([1.0 if norm <= bound else bound / norm for norm in norms])


def cap_weights(weights: np.ndarray, multiple: float) -> np.ndarray:
    """Each weight capped at ``multiple`` × the median weight."""
    weights = np.asarray(weights, dtype=np.float64)
    return np.minimum(weights, multiple * float(np.median(weights)))


def weighted_mean(updates: Sequence[Arrays], weights: np.ndarray) -> dict[str, np.ndarray]:
    """Σ_k w_k Δ_k / Σ_k w_k, array by array."""
    factors = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    return {key: sum(factor * update[key] for factor, update in zip(factors, updates)) for key in updates[0]}


def coordinate_median(updates: Sequence[Arrays]) -> dict[str, np.ndarray]:
    """The element-wise median over the clients (FedMedian's rule)."""
    return {key: np.median(np.stack([u[key] for u in updates]), axis=0) for key in updates[0]}


def trimmed_mean(updates: Sequence[Arrays], fraction: float) -> dict[str, np.ndarray]:
    """The element-wise mean without the ⌊fraction · n⌋ lowest and highest values (Flower's ``trim_mean``)."""
    return {key: trim_mean(np.stack([u[key] for u in updates]), fraction) for key in updates[0]}


def krum_select(updates: Sequence[Arrays], byzantine: int, keep: int) -> list[int]:
    """Positions of the ``keep`` updates with the lowest Krum scores (Flower's ``select_multikrum``), sorted."""
    contents = [RecordDict({"update": ArrayRecord({k: Array(v) for k, v in u.items()})}) for u in updates]
    chosen = {id(content) for content in select_multikrum(contents, byzantine, keep)}
    return [i for i, content in enumerate(contents) if id(content) in chosen]


def bulyan(updates: Sequence[Arrays], byzantine: int) -> tuple[dict[str, np.ndarray], list[int]]:
    """Bulyan (Flower's rule): Multi-Krum keeps n − 2f updates, then each coordinate is the mean of the
    n − 4f kept values closest to their median. Returns the update and the kept positions."""
    keep = len(updates) - 2 * byzantine
    selected = krum_select(updates, byzantine, keep)
    keys = list(updates[0])
    kept = [[updates[i][key] for key in keys] for i in selected]
    medians = [np.median(np.stack(layer), axis=0) for layer in zip(*kept)]
    closest = aggregate_n_closest_weights(medians, kept, keep - 2 * byzantine)
    return dict(zip(keys, closest)), selected


def integer_arrays(client_arrays: Sequence[Arrays], global_arrays: Arrays) -> dict[str, np.ndarray]:
    """The element-wise lower median of the clients' non-float arrays: an integer, of the sent dtype."""
    lower = (len(client_arrays) - 1) // 2
    return {
        key: np.sort(np.stack([arrays[key] for arrays in client_arrays]), axis=0)[lower].astype(value.dtype)
        for key, value in global_arrays.items()
        if not is_float(value)
    }


def robust_aggregate(
    settings: AggregationSettings, client_arrays: Sequence[Arrays], weights: Sequence[float], global_arrays: Arrays
) -> RobustAggregate:
    """The new global arrays (same names, shapes and dtypes as ``global_arrays``) under ``settings.rule``.

    ``client_arrays`` are the accepted replies, ``weights`` their ``num-examples``. ``mean`` is refused: it is
    Flower's FedAvg, computed by the strategy. Raises ValueError when the rule cannot take this many updates.
    """
    if settings.rule == MEAN:
        raise ValueError("'mean' is Flower's aggregate_arrayrecords; robust_aggregate computes the other rules")
    if len(client_arrays) < min_clients(settings) or len(client_arrays) != len(weights):
        raise ValueError(f"{settings.rule!r} cannot aggregate {len(client_arrays)} updates with {len(weights)} weights")
    updates = client_updates(client_arrays, global_arrays)
    result = RobustAggregate(arrays={})
    f = settings.byzantine_clients
    if settings.rule == CLIPPED_MEAN:
        norms = update_norms(updates)
        factors = clip_factors(norms, settings.clip_multiple)
        capped = cap_weights(np.asarray(weights), settings.weight_cap_multiple)
        clipped = [{key: factor * value for key, value in u.items()} for factor, u in zip(factors, updates)]
        update = weighted_mean(clipped, capped)
        result.clipped = [i for i, factor in enumerate(factors) if factor < 1.0]
        result.weight_capped = [i for i, (w, c) in enumerate(zip(weights, capped)) if c < w]
        result.median_update_norm = float(np.median(norms))
    elif settings.rule == "median":
        update = coordinate_median(updates)
    elif settings.rule == "trimmed-mean":
        update = trimmed_mean(updates, settings.trim_fraction)
    elif settings.rule in ("krum", "multi-krum"):
        keep = 1 if settings.rule == "krum" else len(updates) - f
        result.selected = krum_select(updates, f, keep)
        capped = cap_weights(np.asarray(weights), settings.weight_cap_multiple)
        update = weighted_mean([updates[i] for i in result.selected], capped[result.selected])
    elif settings.rule == "bulyan":
        update, result.selected = bulyan(updates, f)
    else:
        raise ValueError(f"unknown aggregation rule {settings.rule!r}")
    floats = {
        key: (global_arrays[key].astype(np.float64) + value).astype(global_arrays[key].dtype)
        for key, value in update.items()
    }
    merged = {**floats, **integer_arrays(client_arrays, global_arrays)}
    result.arrays = {key: np.asarray(merged[key]) for key in global_arrays}
    return result


def conform_to(arrays: ArrayRecord, expected: Mapping[str, ArraySpec]) -> ArrayRecord:
    """The aggregate with the sent dtypes restored: Flower's weighted mean turns integer arrays (BatchNorm's
    ``num_batches_tracked``) into float64, and clients would then send back arrays of another dtype."""
    conformed = {}
    for key, array in arrays.items():
        values, dtype = array.numpy(), np.dtype(expected[key].dtype)
        if dtype.kind in "iu" and values.dtype.kind == "f":
            values = np.rint(values)
        conformed[key] = Array(np.asarray(values.astype(dtype)))
    return ArrayRecord(conformed)
