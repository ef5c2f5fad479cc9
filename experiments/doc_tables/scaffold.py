"""docs/methods/scaffold.md's table of its documented command on three seeds (experiments/scaffold_seeds.yaml)."""

from __future__ import annotations

from experiments.doc_tables.markdown import table
from experiments.doc_tables.recorded import load, pct
from server_app.collapse import CHANCE_MULTIPLE

#: The experiment's settings, in the page's order: name, learning rate, local epochs, aggregation.
SETTINGS = (
    ("scaffold", "0.03 (preset)", 5, "clipped-mean"),
    ("scaffold-mean", "0.03 (preset)", 5, "mean"),
    ("scaffold-lr0.1", "0.1", 5, "clipped-mean"),
    ("scaffold-lr0.1-e1", "0.1", 1, "clipped-mean"),
)
#: Accuracy at or below which the 10-class model is at chance, as the run's warnings judge it.
CHANCE = CHANCE_MULTIPLE / 10


def seeds_table() -> str:
    """Final and best accuracy per seed of each setting, and on how many seeds the run ended at chance."""
    recorded = load("scaffold-seeds")
    seed_names = " / ".join(str(s) for s in recorded.seeds)
    header = ["setting", "learning rate", "local epochs", "aggregation", f"final accuracy, seeds {seed_names} (%)"]
    header += ["best accuracy (%)", "ended at chance"]
    rows = []
    for name, rate, epochs, aggregation in SETTINGS:
        final = recorded.values(name, "final_accuracy")
        best = recorded.values(name, "best_accuracy")
        seeds = sorted(final)
        fallen = sum(final[s] <= CHANCE for s in seeds)
        rows.append(
            [
                f"`{name}`",
                rate,
                str(epochs),
                aggregation,
                " / ".join(pct(final[s]) for s in seeds),
                " / ".join(pct(best[s]) for s in seeds),
                f"{fallen} of {len(seeds)}",
            ]
        )
    return table(header, rows)


BLOCKS = {"scaffold-seeds": seeds_table}
