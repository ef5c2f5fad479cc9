"""Why FedMD's digest leaves its clients behind the same clients trained alone: the consensus's own accuracy each
round, and the digest's target swapped for the public set's labels, paired by seed.

    python -m benchmarks.fedmd_digest [--seeds 0 1 2] [--alpha 0.1] [--arms fedmd alone labels] [--cells DIR]

Runs ``experiments/fedmd_clients.yaml``'s cells (3 LeNet-5 and 2 2NN clients on Fashion-MNIST-mini, Dir(α), transfer
learning on 1,000 labelled public images, 10 rounds of 2 private epochs) in this process, each arm changing one
thing (see ``ARMS``):

- ``fedmd``: FedMD as the app runs it (FedMD_clean's digest: mean absolute error to the consensus, the uniform mean
  of the clients' logits on the round's public draw; Adam lr 1e-3, 1 epoch, batch 256);
- ``alone``: no digest (``fedkad.fedmd-digest = none``): the baseline of FedMD's claim;
- ``labels``: the same digest step (same draw, optimiser, epoch, batch order, BatchNorm settle) with cross-entropy
  to the public draw's true labels in place of the consensus: a digest to a perfect teacher.

Every round it also records what the consensus is worth: the test accuracy of the consensus itself (the argmax of the
mean of the clients' logits, computed from the models the clients sent, on the same 1,000 test images the clients
are scored on) beside the clients' mean and best, as they arrive from their private training (the Revisit) and
after the digest. The diagnostics run after the round's own steps with the random state saved and restored, so
``fedmd`` and ``alone`` reproduce the recorded fedmd-clients cells.
Writes ``measurements/experiments/fedmd_digest.json`` (``fedmd_digest.md`` is written from it by hand).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from flwr.app import RecordDict

import methods.fedkad.method as fedkad_method
from benchmarks.paired_seeds import paired
from experiments.in_process import run_cell_in_process
from experiments.spec import load_experiment
from methods.fedkad.distillation import REFERENCE_DIGEST, Fit, Recipe, model_logits
from models.batchnorm import settle_batchnorm
from protocol.messages import ARRAYS
from simulation.local_run import Resources

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "fedmd_clients.yaml"
OUT = ROOT / "measurements" / "experiments" / "fedmd_digest.json"

#: arm -> (the fedmd_clients.yaml method label it starts from, digest rule: None for the app's own)
ARMS: dict[str, tuple[str, str | None]] = {"fedmd": ("fedmd", None), "alone": ("fedmd-alone", None)}
ARMS["labels"] = ("fedmd", "labels")


def label_digest(
    model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, recipe: Recipe, generator: torch.Generator
) -> Fit:
    """The digest's step with the public labels as the target: ``recipe``'s optimiser, epochs and batches (the
    order drawn from ``generator`` as the digest draws it), cross-entropy instead of the L1 distance to the
    consensus; ends, as the digest does, with the BatchNorm statistics settled on the draw."""
    optimizer = recipe.optimizer_for(list(model.parameters()))
    model.train()
    losses = []
    for _ in range(recipe.epochs):
        order = torch.randperm(len(inputs), generator=generator).to(inputs.device)
        total, steps = 0.0, 0
        for start in range(0, len(order), recipe.batch_size):
            batch = order[start : start + recipe.batch_size]
            loss = F.cross_entropy(model(inputs[batch]), labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, steps = total + float(loss.detach()), steps + 1
        losses.append(total / max(steps, 1))
    settle_batchnorm(model, inputs, batch_size=recipe.batch_size)
    return Fit(tuple(losses), None)


def ensemble_accuracy(logits: list[torch.Tensor], labels: torch.Tensor) -> float:
    """Accuracy of the argmax of the mean of several models' logits (FedMD's consensus, scored)."""
    return float((torch.stack(logits).mean(dim=0).argmax(dim=1).cpu() == labels.cpu()).double().mean())


class Recorder:
    """Patches FedMD's server step for one arm and keeps, per round, the consensus's and the clients' accuracies."""

    def __init__(self) -> None:
        self.rule: str | None = None
        self.rounds: list[dict[str, Any]] = []
        self.draw_labels: torch.Tensor | None = None
        self.public_labels: torch.Tensor | None = None
        strategy = fedkad_method.DistillationStrategy
        original_aggregate, original_distil = strategy.aggregate_arrays, fedkad_method.distil
        original_draw = fedkad_method.draw_generic_indices
        recorder = self

        def distil(model, inputs, consensus, prototypes, held, *, recipe, beta=1.0, generator):
            if recorder.rule == "labels" and recipe is REFERENCE_DIGEST:  # a client's digest, not the global model's
                assert recorder.draw_labels is not None
                return label_digest(model, inputs, recorder.draw_labels.to(inputs.device), recipe, generator)
            return original_distil(
                model, inputs, consensus, prototypes, held, recipe=recipe, beta=beta, generator=generator
            )

        def aggregate(self, contents: list[RecordDict], partition_ids: list[int]):
            recorder.draw_labels, recorder.public_labels = None, self.generic.labels
            result = original_aggregate(self, contents, partition_ids)
            state = torch.get_rng_state()
            recorder.observe(self, contents, partition_ids, result[1])
            torch.set_rng_state(state)
            return result

        def draw(pool_size: int, count: int, generator: torch.Generator) -> torch.Tensor:
            found = original_draw(pool_size, count, generator)  # the round's public draw: its labels, for `labels`
            if recorder.public_labels is not None:
                recorder.draw_labels = recorder.public_labels[found]
            return found

        fedkad_method.draw_generic_indices = draw
        fedkad_method.distil = distil
        strategy.aggregate_arrays = aggregate  # type: ignore[method-assign]

    def observe(self, strategy: Any, contents: list[RecordDict], partition_ids: list[int], report: dict) -> None:
        """The consensus of the models the clients sent, scored on the clients' test images, beside the clients."""
        evaluation = strategy.client_evaluation
        models = [
            strategy.client_model(pid, content.array_records[ARRAYS].to_torch_state_dict()).to(strategy.device)
            for content, pid in zip(contents, partition_ids, strict=True)
        ]
        logits = [model_logits(m, evaluation.inputs, evaluation.batch_size) for m in models]
        clients = list(report["client_accuracies"].values())
        self.rounds.append(
            {
                "round": strategy.current_round,
                "consensus_test": ensemble_accuracy(logits, evaluation.labels),
                "clients_mean": report["client_accuracy_mean"],
                "clients_best": max(clients),
                "clients_after_digest_mean": report.get("client_distilled_accuracy_mean"),
                "consensus_public": report.get("consensus_accuracy"),
                "global": None,  # filled from rounds.jsonl
            }
        )


def run_arm(recorder: Recorder, arm: str, alpha: float, seed: int, cells: Path) -> dict[str, Any]:
    """One cell of ``arm`` at Dir(``alpha``) on ``seed`` (kept in ``cells`` to resume)."""
    done = cells / f"{arm}__alpha{alpha}__seed{seed}.json"
    if done.exists():
        return json.loads(done.read_text())
    label, recorder.rule = ARMS[arm]
    experiment = load_experiment(EXPERIMENT)
    (cell,) = [
        c
        for c in experiment.cells
        if c.method == label and c.seed == seed and dict(c.point)["dirichlet-alpha"] == alpha
    ]
    recorder.rounds.clear()
    name = f"{arm}__alpha{alpha}__seed{seed}"
    config = {**cell.overrides, "seed": seed, "results-dir": str(cells), "run-name": name}
    if run_cell_in_process(config, experiment.clients, Resources(), cells / f"{name}.log"):
        raise SystemExit(f"{name} failed: see {cells / name}.log")
    rounds = [json.loads(line) for line in (cells / name / "rounds.jsonl").read_text().splitlines() if line.strip()]
    for row, recorded in zip(recorder.rounds, rounds, strict=True):
        row["global"] = recorded["accuracy"]
    per_round = list(recorder.rounds)
    result: dict[str, Any] = {
        "clients_final": per_round[-1]["clients_mean"],
        "clients_best": max(r["clients_mean"] for r in per_round),
        "by_round": per_round,
    }
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def consensus_margin(result: dict[str, Any]) -> dict[str, float]:
    """Over the rounds: mean of (consensus − clients' mean) and of (consensus − best client), in points."""
    rows = result["by_round"]
    return {
        "consensus_minus_clients_mean": round(
            100 * statistics.mean(r["consensus_test"] - r["clients_mean"] for r in rows), 2
        ),
        "consensus_minus_best_client": round(
            100 * statistics.mean(r["consensus_test"] - r["clients_best"] for r in rows), 2
        ),
        "rounds_consensus_below_clients_mean": sum(r["consensus_test"] < r["clients_mean"] for r in rows),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--alpha", type=float, default=0.1, choices=[0.1, 0.5])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--cells", type=Path, default=Path("/tmp/fedmd_digest_cells"), help="cells (resumable)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.cells.mkdir(parents=True, exist_ok=True)
    recorder = Recorder()
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:
        for arm in args.arms:
            results[arm][seed] = run_arm(recorder, arm, args.alpha, seed, args.cells)
            print(arm, seed, {k: v for k, v in results[arm][seed].items() if k != "by_round"}, flush=True)
    report: dict[str, Any] = {
        "setting": f"experiments/fedmd_clients.yaml's cells at Dir({args.alpha}); arms as benchmarks/fedmd_digest.py",
        "command": f"python -m benchmarks.fedmd_digest --alpha {args.alpha} --seeds " + " ".join(map(str, args.seeds)),
        "cells": {arm: {str(s): r for s, r in per.items()} for arm, per in results.items()},
        "consensus": {arm: {str(s): consensus_margin(r) for s, r in per.items()} for arm, per in results.items()},
        "paired": {},
    }
    for arm, base in (("fedmd", "alone"), ("labels", "alone"), ("labels", "fedmd")):
        if arm in results and base in results:
            report["paired"][f"{arm} - {base}"] = {
                key: paired(results, arm, base, key) for key in ("clients_final", "clients_best")
            }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
