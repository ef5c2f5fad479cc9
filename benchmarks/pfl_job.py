"""The side-by-side benchmark's job run by pfl-research (PyPI ``pfl``), not by this app.

    /tmp/pfl-venv/bin/python benchmarks/pfl_job.py --job JOB.npz --out RESULT.json

Run with a virtual environment that holds ``pfl[pytorch]==0.6.0`` and torch (``benchmarks/pfl_side_by_side.py``
says how it was made); it imports nothing of this app (that environment has no Flower), so the job comes in a file
that ``python -m benchmarks pfl-side-by-side export`` writes with the app's own code: the training and test images,
every client's partition (the app's IID split), the app's initial LeNet-5 weights with their checksum, each round's
cohort and each client's batch order in that round (the app draws both from its seed; pfl is handed them), and the
optimiser's settings. This file checks the weights it loaded against the checksum and refuses to run on a mismatch.

What pfl runs: ``FederatedAveraging`` with ``SimulatedBackend`` (one process), ``PyTorchModel`` with
``torch.optim.SGD(lr, momentum, weight_decay)`` built anew for every client's update (as pfl does), a central SGD
of learning rate 1 (the mean of the clients' model differences added to the model: FedAvg; the clients' sizes are
equal, so the uniform mean is FedAvg's weighted one), and central evaluation of the whole test set after every
round with pfl's own ``CentralEvaluationCallback`` (whose stock version skips the first round's model), batches of
``eval_batch_size``; pfl's scoring of each client's own data before and after its update is turned off (the app's
clients do not do it; ``--local-evaluation`` turns it on: with it, 4.27 s a round against 2.79 s for the app's
in-process path in one pair at load ≈ 8). Torch runs one thread. Per-round seconds are taken after each round's
evaluation, as the app's ``wall_seconds`` are; the parent process measures the whole process.

The FedFT-EDS job (``settings["method"] == "fedft-eds"``, FedFT-EDS paper Alg. 1) is the same loop with pfl's
model being θ alone (the stages above ``settings["freeze"]``) on φ(x): φ is the loaded model's lower stages, frozen, run
once per client when it is first sampled (kept in float16, as the app's feature cache keeps it) and once over the
test set (float32, as the app's central evaluation keeps it). Each client's update (``FedFTEDS.train_one_user``)
ranks its samples by the hardened-softmax entropy (ρ = ``settings["temperature"]``, float64) of the round's global θ
in eval mode, a batch of ``eval_batch_size`` at a time, keeps the ``selection_size`` highest (ties: the lower index
first) and trains on them in the app's batch order; in round 1 the selections are checked against the ones the app
computed at export. pfl averages θ's differences only: θ is all of pfl's model.

Importable without pfl (its imports are inside ``run``), so the app's type checker and tests can read this file.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

PROCESS_START = time.perf_counter()


class LeNet5(nn.Module):
    """The app's LeNet-5 (``models/lenet.py``) with the same parameter names (``stages.<level>.<index>``), so the
    app's state dict loads into it strictly."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.stages = nn.ModuleDict(
            {
                "low": nn.Sequential(nn.Conv2d(in_channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2)),
                "mid": nn.Sequential(nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()),
                "up": nn.Sequential(nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU()),
                "head": nn.Linear(84, num_classes),
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages.values():
            x = stage(x)
        return x

    # pfl's PyTorchModel calls these two.
    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(x), y)

    @torch.no_grad()
    def metrics(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        from pfl.metrics import Weighted

        logits = self(x)
        n = len(y)
        loss_sum = float(F.cross_entropy(logits, y, reduction="sum"))
        correct = float((logits.argmax(dim=1) == y).sum())
        return {"loss": Weighted(loss_sum, n), "accuracy": Weighted(correct, n)}


class Upper(nn.Module):
    """θ of ``LeNet5`` split after ``level``: the stages above it (shared with the whole model), on φ(x)."""

    def __init__(self, whole: LeNet5, level: str) -> None:
        super().__init__()
        names = list(whole.stages)
        self.stages = nn.Sequential(*(whole.stages[n] for n in names[names.index(level) + 1 :]))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.stages(h)

    loss = LeNet5.loss
    metrics = LeNet5.metrics


@torch.no_grad()
def lower_features(whole: LeNet5, level: str, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    """φ(x): the stages up to and including ``level``, in eval mode, ``batch_size`` rows at a time."""
    whole.eval()
    names = list(whole.stages)
    lower = nn.Sequential(*(whole.stages[n] for n in names[: names.index(level) + 1]))
    return torch.cat([lower(chunk) for chunk in x.split(batch_size)])


def hardened_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Entropy of softmax(z / ρ) per row, from log-softmax in float64 (the app's ``hardened_entropy``)."""
    log_p = torch.log_softmax(logits.to(torch.float64) / temperature, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1)


@torch.no_grad()
def entropy_selection(
    upper: nn.Module, features: torch.Tensor, size: int, temperature: float, batch_size: int
) -> torch.Tensor:
    """The ``size`` rows of highest hardened entropy under ``upper`` in eval mode, highest first, ties by index."""
    upper.eval()
    logits = torch.cat([upper(chunk.float()) for chunk in features.split(batch_size)])
    return torch.argsort(hardened_entropy(logits, temperature), descending=True, stable=True)[:size]


def state_checksum(state: dict[str, torch.Tensor]) -> str:
    """sha256 of the state dict: each name, then its values as contiguous little-endian float32, in order (the
    same function as ``benchmarks.pfl_side_by_side.state_checksum``)."""
    digest = hashlib.sha256()
    for name, tensor in state.items():
        digest.update(name.encode())
        digest.update(tensor.detach().to(torch.float32).contiguous().cpu().numpy().astype("<f4").tobytes())
    return digest.hexdigest()


def normalise(images: np.ndarray, mean: np.ndarray, std: np.ndarray, pad_to_32: bool) -> torch.Tensor:
    """The app's ``data.transforms.normalise``: uint8 N x C x 28 x 28 -> float32 N x C x 32 x 32."""
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if pad_to_32 and x.shape[-1] == 28:
        x = F.pad(x, (2, 2, 2, 2))
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (x - m) / s


def run(job_file: Path, out: Path, local_evaluation: bool = False) -> dict[str, Any]:
    torch.set_num_threads(1)
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.callback.central_evaluation import CentralEvaluationCallback
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.metrics import Metrics
    from pfl.model.pytorch import PyTorchModel

    imported = time.perf_counter()
    job = np.load(job_file)
    settings = json.loads(str(job["settings"]))
    if settings["local_epochs"] != 1:
        raise ValueError("the exported batch orders cover one local epoch (pfl does not reshuffle between epochs)")
    mean, std, pad = job["mean"], job["std"], bool(job["pad_to_32"])
    train_images, train_labels = job["train_images"], job["train_labels"]
    positions, offsets = job["client_positions"], job["client_offsets"]
    cohorts = job["cohorts"]
    orders, order_offsets = job["orders"], job["order_offsets"]
    test_x = normalise(job["test_images"], mean, std, pad)
    test_y = torch.from_numpy(job["test_labels"].astype(np.int64))

    model = LeNet5(in_channels=train_images.shape[1], num_classes=int(settings["num_classes"]))
    names = json.loads(str(job["init_names"]))
    model.load_state_dict({name: torch.from_numpy(job[f"init_{i}"]) for i, name in enumerate(names)}, strict=True)
    loaded = state_checksum(model.state_dict())
    if loaded != str(job["init_sha256"]):
        raise ValueError(f"initial weights differ from the app's: {loaded} != {job['init_sha256']}")
    split_digest = hashlib.sha256(positions.astype("<i8").tobytes() + offsets.astype("<i8").tobytes()).hexdigest()
    if split_digest != str(job["split_sha256"]):
        raise ValueError("the partition table differs from the exported checksum")

    rounds, per_round = cohorts.shape
    fedft = settings.get("method") == "fedft-eds"
    level = str(settings.get("freeze", "none"))
    eval_batch = int(settings["eval_batch_size"])
    features: dict[int, torch.Tensor] = {}  # φ(x) of each client sampled so far, float16 (the app's cache)
    selections: list[tuple[int, int, list[int]]] = []  # round 1's (slot, client, chosen rows)

    def user_ids() -> Any:  # (round, slot, partition id): the app's cohort of each round, in its order
        for r in range(rounds):
            for slot in range(per_round):
                yield (r, slot, int(cohorts[r, slot]))

    ids = user_ids()

    def batch_order(r: int, slot: int) -> torch.Tensor:
        k = r * per_round + slot
        return torch.from_numpy(orders[order_offsets[k] : order_offsets[k + 1]].astype(np.int64))

    def make_dataset(user: tuple[int, int, int]) -> Dataset:
        r, slot, pid = user
        local = positions[offsets[pid] : offsets[pid + 1]]
        y = torch.from_numpy(train_labels[local].astype(np.int64))
        if fedft:  # every local row; FedFTEDS.train_one_user selects and orders them
            if pid not in features:
                x = normalise(train_images[local], mean, std, pad)
                features[pid] = lower_features(model, level, x, eval_batch).to(torch.float16)
            return Dataset((features[pid].float(), y), user_id=f"{r}:{slot}:{pid}")  # float16 values, as float32
        order = batch_order(r, slot)
        x = normalise(train_images[local], mean, std, pad)[order]  # the app's batches: its order, cut in batch_size
        return Dataset((x, y[order]), user_id=f"{r}:{slot}:{pid}")

    training_data = FederatedDataset(make_dataset, lambda: next(ids))
    backend = SimulatedBackend(training_data=training_data, val_data=None)
    trained: nn.Module = Upper(model, level) if fedft else model
    test_set = Dataset((lower_features(model, level, test_x, eval_batch), test_y) if fedft else (test_x, test_y))
    eval_params = NNEvalHyperParams(local_batch_size=eval_batch)

    def local_sgd(params: Any, lr: float) -> torch.optim.Optimizer:
        return torch.optim.SGD(
            params, lr=lr, momentum=float(settings["momentum"]), weight_decay=float(settings["weight_decay"])
        )

    pfl_model = PyTorchModel(
        model=trained,
        local_optimizer_create=local_sgd,
        central_optimizer=torch.optim.SGD(trained.parameters(), lr=1.0),
    )
    records: list[dict[str, Any]] = []
    initial: dict[str, float] = {}
    marks: list[float] = []

    def scores(metrics: Any) -> tuple[float, float]:
        values = {str(name): float(getattr(value, "overall_value", value)) for name, value in metrics}
        return values["Central val | accuracy"], values["Central val | loss"]

    class EveryRoundEvaluation(CentralEvaluationCallback):
        """pfl's central evaluation after every round, the first one's included; records each round's time."""

        def on_train_begin(self, *, model: Any) -> Any:
            metrics = super().on_train_begin(model=model)
            initial["accuracy"], initial["loss"] = scores(metrics)
            marks.append(time.perf_counter())
            return metrics

        def after_central_iteration(self, aggregate_metrics: Any, model: Any, *, central_iteration: int) -> Any:
            stop, metrics = self._eval(model)
            accuracy, loss = scores(metrics)
            marks.append(time.perf_counter())
            records.append(
                {
                    "round": central_iteration + 1,
                    "accuracy": accuracy,
                    "loss": loss,
                    "clients": [int(c) for c in cohorts[central_iteration]],
                    "wall_seconds": marks[-1] - marks[-2],
                }
            )
            # Recorded here; handed back empty, since round 1's names would clash with on_train_begin's in pfl's
            # metrics of that iteration (its stock callback skips iteration 0 for that reason).
            return stop, Metrics()

    class FedAvgWithoutLocalEvaluation(FederatedAveraging):
        """pfl's FedAvg without its per-client evaluation: with ``do_evaluation`` (every ``evaluation_frequency``
        rounds, and always in the first) pfl scores each client's own data before and after its training, two
        forward passes per client that the app's clients do not make; ``--local-evaluation`` keeps them."""

        def get_next_central_contexts(self, *args: Any, **kwargs: Any) -> Any:
            contexts, model, metrics = super().get_next_central_contexts(*args, **kwargs)
            if contexts is not None and not local_evaluation:
                contexts = tuple(dataclasses.replace(c, do_evaluation=False) for c in contexts)
            return contexts, model, metrics

    class FedFTEDS(FedAvgWithoutLocalEvaluation):
        """FedAvg of θ on each client's highest-entropy rows under the round's global θ, in the app's batch order."""

        def train_one_user(self, initial_model_state: Any, model: Any, user_dataset: Any, central_context: Any) -> Any:
            r, slot, pid = (int(part) for part in user_dataset.user_id.split(":"))
            x, y = user_dataset.raw_data
            chosen = entropy_selection(
                trained, x, int(settings["selection_size"]), float(settings["temperature"]), eval_batch
            )
            if r == 0:
                selections.append((slot, pid, chosen.tolist()))
            rows = chosen[batch_order(r, slot)]
            selected = Dataset((x[rows], y[rows]), user_id=user_dataset.user_id)
            return super().train_one_user(initial_model_state, model, selected, central_context)

    algorithm = FedFTEDS() if fedft else FedAvgWithoutLocalEvaluation()
    algorithm.run(
        algorithm_params=NNAlgorithmParams(
            central_num_iterations=rounds,
            evaluation_frequency=1,
            train_cohort_size=per_round,
            val_cohort_size=0,
        ),
        backend=backend,
        model=pfl_model,
        model_train_params=NNTrainHyperParams(
            local_learning_rate=float(settings["learning_rate"]),
            local_num_epochs=int(settings["local_epochs"]),
            local_batch_size=int(settings["batch_size"]),
        ),
        model_eval_params=eval_params,
        callbacks=[EveryRoundEvaluation(test_set, model_eval_params=eval_params)],
        send_metrics_to_platform=False,
    )
    final_checksum = state_checksum(model.state_dict())
    checked = None
    if fedft:  # round 1's selections against the app's (computed at export from the same initial model)
        expected, at = job["first_selections"], job["first_selection_offsets"]
        checked = all(chosen == expected[at[slot] : at[slot + 1]].tolist() for slot, _, chosen in selections)
        checked = checked and len(selections) == per_round
    result = {
        "pfl_version": _version("pfl"),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "method": settings.get("method", "fedavg"),
        "local_evaluation": local_evaluation,
        "first_round_selections_match_app": checked,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "init_sha256": loaded,
        "split_sha256": split_digest,
        "final_sha256": final_checksum,
        "initial_accuracy": initial["accuracy"],
        "initial_loss": initial["loss"],
        "final_accuracy": records[-1]["accuracy"] if records else None,
        "best_accuracy": max(r["accuracy"] for r in records) if records else None,
        "import_seconds": imported - PROCESS_START,
        "setup_seconds": marks[0] - imported if marks else None,
        "rounds": records,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", type=Path, required=True, help="the job file of `pfl_side_by_side export`")
    parser.add_argument("--out", type=Path, required=True, help="where the result JSON goes")
    parser.add_argument(
        "--local-evaluation", action="store_true", help="keep pfl's scoring of each client's data around its training"
    )
    args = parser.parse_args()
    result = run(args.job, args.out, args.local_evaluation)
    print(
        f"pfl {result['pfl_version']}: {len(result['rounds'])} rounds, initial {result['initial_accuracy']:.4f}, "
        f"final {result['final_accuracy']:.4f}"
    )


if __name__ == "__main__":
    main()
