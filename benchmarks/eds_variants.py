"""Why FedFT-EDS trails FedFT-RDS on the default run: selection variants that each change one thing, paired by seed.

    python -m benchmarks.eds_variants [--seeds 0 1 2] [--arms rds eds ...] [--cells DIR]

Runs `make run`'s setting (``experiments/default_run.yaml``'s start: WRN-16-1 pretrained on MNIST with a new head,
10 Fashion-MNIST-mini clients Dir(0.1), P_ds = 10%, 5 local epochs, 10 rounds) in this process with the ClientApp's
own ``local_update``; an arm replaces only the selection step (``select_samples`` as ``local_update`` calls it),
so split, start, batch order and everything else are the seed's. Arms (see ``ARMS``):

- ``rds``, ``eds``: the two methods as the app runs them (FedFT-RDS, FedFT-EDS at ρ = 0.1);
- ``eds-no-repeat`` (H1, repetition): the top-entropy 10% among the samples the client did not pick last round;
- ``eds-stratified`` (H2, class balance): the top-entropy samples within each class, each class's share of the 10%
  in proportion to its share of the client's data (largest remainders);
- ``eds-band`` (H3, the very top is ambiguous or atypical): the next band of the ranking, ranks ⌈P·n⌉..2⌈P·n⌉;
- ``eds-rho1`` (H3, the hardened softmax): the same top-10% rule under ρ = 1 (the run-config ``temperature``);
- ``eds-warmup`` (H3, the new head): RDS's own random draw in rounds 1-3, while the head is young, EDS after;
- ``eds-low`` (direction check): the 10% lowest-entropy samples;
- ``eds-unseen`` (H1, coverage): the top-entropy 10% among the samples the client has not picked in any earlier
  round (the highest of the picked ones fill up once fewer are left): every sample is reached before any repeats;
- ``eds-stratified-unseen`` (H2 at full coverage): ``eds-stratified``'s class quotas, filled from unpicked samples
  first; against ``eds-unseen`` the one change is the class balance;
- ``rds-fixed`` (H1, the other direction): RDS's round-1 draw kept for every round (10% coverage, full repetition);
- ``eds-bn-rds`` (H4, BatchNorm statistics): EDS's picks trained on, θ's BatchNorm statistics settled (the last step
  of ``local_update``) on the random subset RDS draws that round instead of on the picks; against ``eds`` the one
  change is the samples the statistics come from, against ``rds`` the one change is the samples trained on;
- ``rds-bn-eds`` (H4, the other direction): RDS's own draw trained on (same batch order as ``rds``), the statistics
  settled on EDS's top-entropy picks;
- ``rds-bn-random`` (control for ``rds-bn-eds``): RDS's own draw trained on, the statistics settled on another random
  subset of the same size (drawn from a seed the run does not use): a settle on rows other than the trained ones,
  without a selection bias.

Besides each cell's accuracies it records, per client and round, the selection (for the coverage measures of
``benchmarks/selection_coverage.py``), the total-variation distance between the picks' class mix and the client's,
the share of picks the received model misclassifies, and, in every entropy arm, the Spearman correlation of the
ρ = 0.1 and ρ = 1 entropies over the client's samples and the overlap of their top-10% sets.
Writes ``measurements/experiments/eds_vs_rds.json`` (``eds_vs_rds.md`` is written from it by hand).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import torch

import client_app.local_update as update_module
import client_app.train_step as train_step_module
from benchmarks.paired_seeds import paired
from benchmarks.selection_coverage import Selections, coverage
from client_app.data_selection import hardened_entropy, select_by_entropy, select_random
from client_app.local_update import round_seed
from data.sample_share import selection_size
from experiments.in_process import run_cell_in_process
from simulation.local_run import Resources

OUT = Path(__file__).resolve().parents[1] / "measurements" / "experiments" / "eds_vs_rds.json"

#: arm -> (run-config overrides, selection rule replacing the top-entropy rule, or None for the app's own)
ARMS: dict[str, tuple[dict[str, Any], str | None]] = {  # in the order they run within a seed
    "rds": ({"method": "fedft-rds"}, None),
    "eds": ({"method": "fedft-eds"}, None),
    "eds-unseen": ({"method": "fedft-eds"}, "unseen"),
    "eds-stratified-unseen": ({"method": "fedft-eds"}, "stratified-unseen"),
    "eds-no-repeat": ({"method": "fedft-eds"}, "no-repeat"),
    "eds-stratified": ({"method": "fedft-eds"}, "stratified"),
    "eds-rho1": ({"method": "fedft-eds", "temperature": 1.0}, None),
    "rds-fixed": ({"method": "fedft-rds"}, "fixed"),
    "eds-warmup": ({"method": "fedft-eds"}, "warmup"),
    "eds-band": ({"method": "fedft-eds"}, "band"),
    "eds-low": ({"method": "fedft-eds"}, "low"),
    "eds-bn-rds": ({"method": "fedft-eds"}, "bn-rds"),
    "rds-bn-eds": ({"method": "fedft-eds"}, "rds-bn-eds"),
    "rds-bn-random": ({"method": "fedft-eds"}, "rds-bn-random"),
}

#: added to the run's seed for ``rds-bn-random``'s independent draw
OTHER_SEED = 1000

#: rounds in which ``eds-warmup`` draws RDS's random subset before it ranks by entropy
WARMUP_ROUNDS = 3


# --- selection rules (pure) ------------------------------------------------------------------------------------


def select_excluding(entropies: torch.Tensor, size: int, excluded: list[int]) -> torch.Tensor:
    """The ``size`` highest entropies among the samples not in ``excluded``, highest first; where fewer are left,
    the highest of the excluded ones fill up. Ties keep the lower index first."""
    order = torch.argsort(entropies, descending=True, stable=True).tolist()
    banned = set(excluded)
    allowed = [i for i in order if i not in banned]
    filler = [i for i in order if i in banned]
    return torch.tensor((allowed + filler)[:size], dtype=torch.long)


def class_quotas(labels: list[int], size: int) -> dict[int, int]:
    """Each class's share of ``size`` in proportion to its count in ``labels`` (largest remainders; remainder ties go
    to the larger class, then the lower label)."""
    counts = Counter(labels)
    n = len(labels)
    exact = {c: size * k / n for c, k in counts.items()}
    quotas = {c: int(v) for c, v in exact.items()}
    left = size - sum(quotas.values())
    for c in sorted(counts, key=lambda c: (-(exact[c] - quotas[c]), -counts[c], c))[:left]:
        quotas[c] += 1
    return quotas


def select_stratified(
    entropies: torch.Tensor, labels: list[int], size: int, excluded: list[int] | tuple[int, ...] = ()
) -> torch.Tensor:
    """The top-entropy samples within each class, ``class_quotas`` of each, in ranking order over all picks; within
    a class the samples not in ``excluded`` come first."""
    quotas = class_quotas(labels, size)
    ranking = torch.argsort(entropies, descending=True, stable=True).tolist()
    banned = set(excluded)
    order = [i for i in ranking if i not in banned] + [i for i in ranking if i in banned]
    taken: Counter[int] = Counter()
    picks = []
    for i in order:
        if taken[labels[i]] < quotas[labels[i]]:
            taken[labels[i]] += 1
            picks.append(i)
    return torch.tensor(picks, dtype=torch.long)


def select_band(entropies: torch.Tensor, size: int) -> torch.Tensor:
    """Ranks ``size``..2·``size`` of the entropy ranking (the band just below the top); the last ``size`` ranks
    where the client holds fewer than 2·``size`` samples."""
    order = torch.argsort(entropies, descending=True, stable=True)
    start = min(size, len(order) - size)
    return order[start : start + size]


def select_lowest(entropies: torch.Tensor, size: int) -> torch.Tensor:
    """The ``size`` lowest entropies, lowest first (ties: lower index first)."""
    return torch.argsort(entropies, descending=False, stable=True)[:size]


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(x: torch.Tensor) -> torch.Tensor:
        x = x.double().cpu()
        order = torch.argsort(x, stable=True)
        r = torch.empty_like(x)
        r[order] = torch.arange(len(x), dtype=torch.float64)
        for value in torch.unique(x):  # average ranks over ties
            mask = x == value
            if mask.sum() > 1:
                r[mask] = r[mask].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = float((ra.square().sum() * rb.square().sum()).sqrt())
    return float((ra * rb).sum()) / denominator if denominator else float("nan")


def total_variation(picked: list[int], labels: list[int]) -> float:
    """Total-variation distance between the class mix of ``picked`` labels and of ``labels``."""
    a, b = Counter(picked), Counter(labels)
    return 0.5 * sum(abs(a[c] / len(picked) - b[c] / len(labels)) for c in set(a) | set(b))


# --- the harness ------------------------------------------------------------------------------------------------


class Recorder:
    """Replaces ``local_update``'s selection and entropy functions for one arm and keeps what each round picked."""

    def __init__(self) -> None:
        self.rule: str | None = None
        self.selections: Selections = {}
        self.rounds: list[dict[str, Any]] = []
        self.current: dict[str, Any] = {}
        original_update = update_module.local_update
        original_scored, original_unscored = update_module.select_samples, update_module.select_unscored
        original_features, original_settle = update_module.local_features, update_module.settle_batchnorm

        def local_update(model, data, config, **kw):
            self.current = dict(partition=kw["partition_id"], round=kw["server_round"], labels=data.labels.tolist())
            return original_update(model, data, config, **kw)

        def features(model, data, config, device, cache, cache_key):
            found = original_features(model, data, config, device, cache, cache_key)
            self.current.update(features=found[0], config=config)
            return found

        def settle(model, inputs, **kw):
            rows = self.current.pop("settle_rows", None)
            if rows is not None:
                inputs = self.current["features"].rows(rows).to(inputs.device)
            return original_settle(model, inputs, **kw)

        def entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
            self.current["logits"] = logits.detach().cpu()
            return hardened_entropy(logits, temperature)

        def scored(policy, entropies, fraction, generator):
            chosen = original_scored(policy, entropies, fraction, generator)
            size = selection_size(len(entropies), fraction)
            if self.rule == "warmup" and self.current["round"] <= WARMUP_ROUNDS:
                chosen = select_random(len(entropies), size, generator).to(entropies.device)  # RDS's own draw
            elif self.rule == "bn-rds":  # statistics from the subset RDS draws this round (its own generator)
                config = self.current["config"]
                seed = round_seed(config.seed, self.current["round"], self.current["partition"])
                self.current["settle_rows"] = select_random(len(entropies), size, torch.Generator().manual_seed(seed))
            elif self.rule in ("rds-bn-eds", "rds-bn-random"):  # RDS's draw from the round's generator, as RDS makes it
                self.current["settle_rows"] = chosen.cpu()
                if self.rule == "rds-bn-random":
                    config = self.current["config"]
                    other = round_seed(config.seed + OTHER_SEED, self.current["round"], self.current["partition"])
                    self.current["settle_rows"] = select_random(
                        len(entropies), size, torch.Generator().manual_seed(other)
                    )
                chosen = select_random(len(entropies), size, generator).to(entropies.device)
            elif self.rule not in (None, "warmup"):
                chosen = self.select(entropies.cpu(), size).to(entropies.device)
            return self.keep(chosen, entropies)

        update_module.local_features = features
        update_module.settle_batchnorm = settle
        update_module.hardened_entropy = entropy
        update_module.select_samples = scored

        def unscored(policy, num_samples, fraction, generator):
            chosen = original_unscored(policy, num_samples, fraction, generator)
            if self.rule == "fixed" and self.current["round"] > 1:  # the round-1 draw, kept
                chosen = torch.tensor(self.selections[(self.current["partition"], 1)][0], dtype=torch.long)
            return self.keep(chosen, None)

        update_module.select_unscored = unscored
        train_step_module.local_update = local_update

    def select(self, entropies: torch.Tensor, size: int) -> torch.Tensor:
        labels = self.current["labels"]
        if self.rule == "no-repeat":
            last = self.selections.get((self.current["partition"], self.current["round"] - 1), ([], []))[0]
            return select_excluding(entropies, size, last)
        if self.rule in ("unseen", "stratified-unseen"):
            partition, now = self.current["partition"], self.current["round"]
            earlier = sorted(
                {i for (p, r), (picks, _) in self.selections.items() if p == partition and r < now for i in picks}
            )
            if self.rule == "unseen":
                return select_excluding(entropies, size, earlier)
            return select_stratified(entropies, labels, size, earlier)
        if self.rule == "stratified":
            return select_stratified(entropies, labels, size)
        if self.rule == "band":
            return select_band(entropies, size)
        if self.rule == "low":
            return select_lowest(entropies, size)
        raise ValueError(self.rule)

    def keep(self, chosen: torch.Tensor, entropies: torch.Tensor | None) -> torch.Tensor:
        labels = self.current["labels"]
        picked = chosen.cpu().tolist()
        self.selections[(self.current["partition"], self.current["round"])] = (picked, labels)
        row: dict[str, Any] = {
            "partition": self.current["partition"],
            "round": self.current["round"],
            "class_tv": total_variation([labels[i] for i in picked], labels),
        }
        logits = self.current.pop("logits", None)
        if entropies is not None and logits is not None:
            wrong = logits.argmax(dim=1) != torch.tensor(labels)
            row["picked_misclassified"] = float(wrong[picked].double().mean())
            row["local_misclassified"] = float(wrong.double().mean())
            e01, e1 = hardened_entropy(logits, 0.1), hardened_entropy(logits, 1.0)
            size = len(picked)
            top01 = set(select_by_entropy(e01, size).tolist())
            top1 = set(select_by_entropy(e1, size).tolist())
            row["spearman_rho01_rho1"] = spearman(e01, e1)
            row["top_set_overlap_rho01_rho1"] = len(top01 & top1) / size
        self.rounds.append(row)
        return chosen


def run_arm(recorder: Recorder, arm: str, seed: int, rounds: int, cells: Path) -> dict[str, Any]:
    """One cell of ``arm`` on ``seed``: its accuracies and its selection measures (kept in ``cells`` to resume)."""
    done = cells / f"{arm}__seed{seed}.json"
    if done.exists():
        return json.loads(done.read_text())
    overrides, recorder.rule = ARMS[arm]
    recorder.selections.clear()
    recorder.rounds.clear()
    name = f"{arm}__seed{seed}"
    config = {
        **overrides,
        "seed": seed,
        "num-server-rounds": rounds,
        "client-threads": 1,
        "results-dir": str(cells),
        "run-name": name,
    }
    if run_cell_in_process(config, 10, Resources(), cells / f"{name}.log"):
        raise SystemExit(f"{name} failed: see {cells / name}.log")
    summary = json.loads(next(cells.glob(f"**/{name}/summary.json")).read_text())
    result: dict[str, Any] = {
        "last10": summary["mean_last10_accuracy"],
        "final": summary["final_accuracy"],
        "best": summary["best_accuracy"],
        **coverage(recorder.selections, rounds),
        "class_tv": statistics.mean(r["class_tv"] for r in recorder.rounds),
    }
    for key in ("picked_misclassified", "local_misclassified", "spearman_rho01_rho1", "top_set_overlap_rho01_rho1"):
        values = [r[key] for r in recorder.rounds if key in r]
        if values:
            result[key] = statistics.mean(values)
            if key == "spearman_rho01_rho1":
                result["spearman_rho01_rho1_min"] = min(values)
    result["by_round"] = {
        key: [
            statistics.mean(r[key] for r in recorder.rounds if r["round"] == rnd and key in r)
            for rnd in range(1, rounds + 1)
        ]
        for key in ("class_tv", "picked_misclassified", "local_misclassified", "top_set_overlap_rho01_rho1")
        if any(key in r for r in recorder.rounds)
    }
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cells", type=Path, default=Path("/tmp/eds_variants_cells"), help="cells (resumable)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.cells.mkdir(parents=True, exist_ok=True)
    recorder = Recorder()
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:  # seed-major, so that an interrupted study has whole seeds
        for arm in args.arms:
            results[arm][seed] = run_arm(recorder, arm, seed, args.rounds, args.cells)
            print(arm, seed, {k: round(v, 4) for k, v in results[arm][seed].items() if k != "by_round"}, flush=True)
    report: dict[str, Any] = {
        "setting": "make run's (default_run.yaml's start), P_ds 10%, 10 rounds; arms as benchmarks/eds_variants.py",
        "command": "python -m benchmarks.eds_variants --seeds " + " ".join(map(str, args.seeds)),
        "cells": {arm: {str(s): r for s, r in per.items()} for arm, per in results.items()},
        "paired": {},
    }
    for base in ("rds", "eds"):
        if base not in results:
            continue
        for arm in args.arms:
            if arm != base and not (base == "eds" and arm == "rds"):
                report["paired"][f"{arm} - {base}"] = {
                    key: paired(results, arm, base, key) for key in ("last10", "final", "best")
                }
    for arm, base in (("eds-stratified-unseen", "eds-unseen"),):  # H2 at equal (full) coverage
        if arm in results and base in results:
            report["paired"][f"{arm} - {base}"] = {
                key: paired(results, arm, base, key) for key in ("last10", "final", "best")
            }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
