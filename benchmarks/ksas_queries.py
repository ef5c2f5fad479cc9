"""Why KAFAL's KSAS query trails random querying on Fashion-MNIST-mini: what its picks are, and KSAS without its
knowledge-specialised weights, paired by seed.

    python -m benchmarks.ksas_queries [--seeds 0 1 2] [--arms random kafal kafal-vanilla]

Runs ``experiments/kafal_fmnist_ksas.yaml``'s cells in this process (the real ServerApp and ClientApp), arms:
``random`` and ``kafal`` as the file has them, and ``kafal-vanilla``: KSAS with ``kafal.kafal-ksas-weighting = vanilla``
(the symmetric KL of the plain softmaxes, the paper's Fig. 4(e) ablation): the one variable is the weight n_y^λ.
At every query it records, per client: the class mix of the picks against the unlabelled pool's (total-variation
distance, by the true labels, which the query never sees), the share of picks from classes the client has no
labelled sample of (KSAS's weights give those classes 0), the share of picks the global model misclassifies, and,
from the same two models, how far the specialised and the vanilla scores agree (Spearman, top-budget overlap) and
how much of a picked sample's specialised score comes from its largest class term.
Writes ``measurements/experiments/ksas_vs_random.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

import methods.kafal.method as kafal_method
from benchmarks.eds_variants import spearman, total_variation
from benchmarks.paired_seeds import paired
from experiments.in_process import run_cell_in_process
from experiments.spec import load_experiment
from methods.kafal.ksas import knowledge_log_weights, ksas_scores, top_scores
from methods.kafal.queries.outputs import collect_outputs
from simulation.local_run import Resources

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "kafal_fmnist_ksas.yaml"
OUT = ROOT / "measurements" / "experiments" / "ksas_vs_random.json"
EXTRA = {"kafal-vanilla": ("kafal", {"kafal.kafal-ksas-weighting": "vanilla"})}  # arm -> (file's method, its changes)


def largest_term_share(client_logits: torch.Tensor, global_logits: torch.Tensor, log_w: torch.Tensor) -> torch.Tensor:
    """Per row: the largest class term of the symmetric KL over the sum of the terms (1 = one class carries it)."""
    log_p = torch.log_softmax(client_logits + log_w, dim=1)
    log_q = torch.log_softmax(global_logits + log_w, dim=1)
    terms = (log_p.exp() - log_q.exp()) * (log_p - log_q)
    terms = torch.where(torch.isinf(log_p) & torch.isinf(log_q), torch.zeros_like(terms), terms)
    return terms.max(dim=1).values / terms.sum(dim=1).clamp(min=1e-30)


class QueryRecorder:
    """Wraps KAFAL's ``client_pool`` and ``select_queries`` to record what each query picks."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.current: dict[str, Any] = {}
        original_pool, original_select = kafal_method.client_pool, kafal_method.select_queries

        def client_pool(node, num_samples, labels):
            pool = original_pool(node, num_samples, labels)
            self.current = {"pool": pool, "labels": labels.cpu()}
            return pool

        def select_queries(strategy, budget, context, generator):
            positions = original_select(strategy, budget, context, generator)
            self.record(positions, budget, context)
            return positions

        kafal_method.client_pool = client_pool
        kafal_method.select_queries = select_queries

    @torch.no_grad()
    def record(self, positions: torch.Tensor, budget: int, context) -> None:
        pool, labels = self.current["pool"], self.current["labels"]
        pool_labels = labels[pool.unlabelled].tolist()
        picked = [pool_labels[i] for i in positions.tolist()]
        counts = context.class_counts.cpu()
        unseen = {c for c in range(len(counts)) if counts[c] == 0}
        client = collect_outputs(context.model, context.unlabelled_inputs, context.batch_size).logits.cpu().double()
        glob = collect_outputs(context.global_model, context.unlabelled_inputs, context.batch_size).logits.cpu()
        glob = glob.double()
        specialised = ksas_scores(client, glob, counts, context.kafal_lambda, "specialised")
        vanilla = ksas_scores(client, glob, counts, context.kafal_lambda, "vanilla")
        top_s, top_v = set(top_scores(specialised, budget).tolist()), set(top_scores(vanilla, budget).tolist())
        wrong = (glob.argmax(dim=1) != torch.tensor(pool_labels)).double()
        log_w = knowledge_log_weights(counts, context.kafal_lambda, "specialised").double()
        self.rows.append(
            {
                "class_tv_vs_unlabelled": total_variation(picked, pool_labels),
                "picks_in_unlabelled_classes": sum(c in unseen for c in picked) / len(picked),
                "pool_in_unlabelled_classes": sum(c in unseen for c in pool_labels) / len(pool_labels),
                "picks_global_misclassified": float(wrong[positions].mean()),
                "pool_global_misclassified": float(wrong.mean()),
                "spearman_specialised_vanilla": spearman(specialised, vanilla),
                "top_overlap_specialised_vanilla": len(top_s & top_v) / budget,
                "largest_term_share_of_picks": float(largest_term_share(client, glob, log_w)[positions].mean()),
            }
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=["random", "kafal", "kafal-vanilla"])
    parser.add_argument("--cells", type=Path, default=Path("/tmp/ksas_queries_cells"), help="cells (resumable)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.cells.mkdir(parents=True, exist_ok=True)
    experiment = load_experiment(SPEC)
    by_method = {(cell.method, cell.seed): dict(cell.overrides) for cell in experiment.cells}
    recorder = QueryRecorder()
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:
        for arm in args.arms:
            done = args.cells / f"{arm}__seed{seed}.json"
            if not done.exists():
                method, changes = EXTRA.get(arm, (arm, {}))
                name = f"{arm}__seed{seed}"
                overrides = {
                    **by_method[(method, seed)],
                    **changes,
                    "seed": seed,
                    "results-dir": str(args.cells),
                    "run-name": name,
                }
                recorder.rows.clear()
                if run_cell_in_process(overrides, experiment.clients, Resources(), args.cells / f"{name}.log"):
                    raise SystemExit(f"{name} failed: see its log")
                summary = json.loads(next(args.cells.glob(f"**/{name}/summary.json")).read_text())
                result = {"final": summary["final_accuracy"], "best": summary["best_accuracy"]}
                for key in recorder.rows[0] if recorder.rows else ():
                    result[key] = statistics.mean(r[key] for r in recorder.rows)
                done.write_text(json.dumps(result, indent=2) + "\n")
            results[arm][seed] = json.loads(done.read_text())
            print(arm, seed, {k: round(v, 4) for k, v in results[arm][seed].items()}, flush=True)
    report: dict[str, Any] = {
        "setting": "experiments/kafal_fmnist_ksas.yaml's cells, in process; kafal-vanilla = kafal with "
        "kafal-ksas-weighting vanilla",
        "command": "python -m benchmarks.ksas_queries --seeds " + " ".join(map(str, args.seeds)),
        "cells": {arm: {str(s): r for s, r in per.items()} for arm, per in results.items()},
        "paired": {
            f"{arm} - {base}": {key: paired(results, arm, base, key) for key in ("final", "best")}
            for arm, base in (("kafal", "random"), ("kafal-vanilla", "random"), ("kafal-vanilla", "kafal"))
            if arm in results and base in results
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
