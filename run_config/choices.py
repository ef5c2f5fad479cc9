"""The values some settings choose among. They are declared here, below the strategies that implement them, because
the run configuration checks them before any strategy exists."""

from __future__ import annotations

#: ``aggregation``: FedAvg's weighted mean, its clipped form, and the Byzantine-robust rules.
MEAN = "mean"
CLIPPED_MEAN = "clipped-mean"
AGGREGATION_RULES = (CLIPPED_MEAN, MEAN, "median", "trimmed-mean", "krum", "multi-krum", "bulyan")
#: the largest ``trim-fraction`` Flower's ``trim_mean`` accepts is below this; it always leaves a client
MAX_TRIM_FRACTION = 0.5

#: ``straggler-mode``: stragglers drawn anew each round, or the same clients every round.
STRAGGLER_MODES = ("redraw", "constant")
#: ``straggler-work``: stragglers deliver nothing, or part of their local epochs.
STRAGGLER_WORK = ("none", "partial")
