"""FedAT's single-client ablations (thesis §5.4.1, Tables 5.1–5.4, Fig. 5.9 and Fig. 5.10), one command:

    python -m experiments.fedat_single_client [--dataset fashion-mnist-mini] [--parts fig5_9,table5_3,...]
        [--client-init global|fresh] [--levels low,mid,up] [--out measurements/experiments/...]

The training set is split between the server's generic data D_g and one client's data D_1: IID (D_g a random 20%,
D_1 the other 80%) and non-IID (D_g every image of classes 0–8; D_1 all of class 9 plus a share of classes 0–8,
which overlaps D_g as it must in the thesis). A global model is trained on D_g and a smaller client model on D_1
(Table 5.1; with the app's pretraining recipe, ``server_app/pretraining.py``: warm-up and cosine decay, BatchNorm
statistics re-estimated after each epoch, so that both start well trained). The client model starts as FedAT's
``fedat.client-init`` says: ``global`` (the default), the trained global model reduced to the client's architecture, as
a FedAT client gets the global model when it joins; ``fresh``, independently initialised. Then FedAT's server steps
(``methods/fedat/attention_transfer.py``) run on copies of the global model. Always: step 1 alone (AT from the client,
Table 5.2) and the "D_g only" control (the same epochs of plain cross-entropy with the same SGD). The parts
(``--parts``, all by default):

- ``fig5_9``: for metadata from each level of ``--levels``, step 2 (θ on the client's feature maps) and step 3 with
  and without AT (Fig. 5.9; at ``low``, Table 5.4);
- ``table5_3`` (non-IID): step 2 alone on up-level metadata, of class 9 only after 1–4 epochs and of all classes
  after 10–40 epochs, each from the step-1 model;
- ``fig5_10`` (non-IID): steps 2 and 3 (with and without AT) on a random 100% / 10% / 1% of the low-level metadata;
- ``server_lr``: step 1 and the control (both scenarios) and, non-IID, steps 2–3 on low-level metadata, again
  with the thesis's plain SGD at lr 0.1 and with two optimisers that are *not* the thesis's setting (lr 0.01; momentum
  0.9, the reference AT code's);
- ``bn_refresh``: the lr 0.1 and lr 0.01 chains of ``server_lr`` (the same numbers), each model also scored after its
  BatchNorm statistics are re-estimated on D_g with dropout off, to see whether a server step's loss is in the
  weights or in the statistics.

The step-1 model, the control and the ``fig5_9`` rows share one random stream in that order (the recorded rows);
every other chain of steps starts a fresh one from ``--seed``, so its numbers do not depend on which parts run.
Test accuracy on all classes and on class 9 after each. Results go to ``results.json`` and ``results.md`` in
``--out``, rewritten after each scenario.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data.catalog import DATASETS
from data.loading import load_dataset
from data.transforms import to_model_input
from methods.fedat.attention_transfer import (
    AT_LEVELS,
    global_copy,
    inherit_from_global,
    settle_trained_part,
    train_server_step,
)
from methods.fedat.method import CLIENT_INITS, parse_levels
from methods.registry import parse_config
from models import SplitModel, build_model
from models.batchnorm import settle_batchnorm
from models.outputs import extract_in_batches
from models.training import cross_entropy_of, evaluate, train_epochs
from run_config.defaults import load_defaults
from server_app.pretraining import pretrain

#: The thesis's server steps: SGD lr 0.1 (plain SGD: no momentum named); AT 2 epochs, metadata 2 epochs; β = 1,000.
#: Weight decay and the batch size are not given by the thesis (the reference AT code's).
STEP: dict[str, Any] = {"lr": 0.1, "batch_size": 64, "momentum": 0.0, "weight_decay": 5e-4}
AT_EPOCHS, METADATA_EPOCHS = 2, 2

#: ``server_lr``: the server optimisers compared; only the first has the thesis's learning rate.
SERVER_SETTINGS: dict[str, dict[str, Any]] = {
    "server SGD lr 0.1, momentum 0 (the default: the thesis's plain SGD)": STEP,
    "server SGD lr 0.01, momentum 0 (NOT the thesis's lr)": {**STEP, "lr": 0.01},
    "server SGD lr 0.1, momentum 0.9 (the reference AT code's, NOT the thesis's)": {**STEP, "momentum": 0.9},
}
#: Table 5.3: (name, classes of the metadata or None for all, epoch counts reported).
TABLE5_3: tuple[tuple[str, int | None, tuple[int, ...]], ...] = (
    ("class 9 only", 9, (1, 2, 3, 4)),
    ("all classes", None, (10, 20, 30, 40)),
)
#: Fig. 5.10: shares of the client's low-level metadata kept for step 2.
FIG5_10_SHARES: tuple[float, ...] = (1.0, 0.1, 0.01)
PARTS: tuple[str, ...] = ("fig5_9", "table5_3", "fig5_10", "server_lr", "bn_refresh")
#: ``bn_refresh``: the server optimisers whose chains are also scored with re-estimated BatchNorm statistics.
BN_SETTINGS = {name: step for name, step in SERVER_SETTINGS.items() if step["momentum"] == STEP["momentum"]}

Score = Callable[[SplitModel], dict[str, float]]


@dataclass(frozen=True)
class Scenario:
    """One scenario's trained baselines and data, shared (never changed) by every row of every part."""

    global_model: SplitModel
    client_model: SplitModel
    generic: tuple[torch.Tensor, torch.Tensor]
    client: tuple[torch.Tensor, torch.Tensor]
    score: Score
    seed: int


def split_generic(
    labels: np.ndarray, scenario: str, client_share: float, seed: int, generic_share: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(D_g, D_1) positions in the training set for ``iid`` or ``non-iid``; non-IID, D_g keeps a seeded
    ``generic_share`` of each of classes 0–8 (all of them by default, as the thesis)."""
    rng = np.random.default_rng(seed)
    if scenario == "iid":
        order = rng.permutation(len(labels))
        cut = len(labels) // 5
        return np.sort(order[:cut]), np.sort(order[cut:])
    generic = np.flatnonzero(labels != 9)
    others = np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), int(client_share * (labels == c).sum()), replace=False)
            for c in range(9)
        ]
    )
    client = np.sort(np.concatenate([np.flatnonzero(labels == 9), others]))
    if generic_share < 1.0:
        generic = np.sort(
            np.concatenate(
                [
                    rng.choice(np.flatnonzero(labels == c), int(generic_share * (labels == c).sum()), replace=False)
                    for c in range(9)
                ]
            )
        )
    return generic, client


def class_positions(labels: torch.Tensor, wanted: int | None) -> torch.Tensor:
    """Positions of the metadata maps of class ``wanted`` (Table 5.3's "class 9 only"), or of all maps for None."""
    if wanted is None:
        return torch.arange(len(labels))
    return torch.nonzero(labels == wanted).flatten()


def share_positions(n: int, share: float, seed: int) -> np.ndarray:
    """round(share × n) distinct positions out of ``n`` maps, drawn at random from ``seed``, sorted (Fig. 5.10:
    the client uploads a random share of its metadata). Refuses a share outside (0, 1] or one that keeps no map."""
    if not 0 < share <= 1:
        raise ValueError(f"the metadata share must be in (0, 1], got {share}")
    count = round(share * n)
    if count == 0:
        raise ValueError(f"a share of {share} of {n} maps keeps none")
    return np.sort(np.random.default_rng(seed).choice(n, count, replace=False))


def fresh_rng(seed: int) -> torch.Generator:
    """Start a chain of steps from ``seed``: reseed torch's global stream (the models' dropout draws from it) and
    return a new generator for the mini-batch order, so that the chain's numbers do not depend on what ran before."""
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def snapshot_hook(
    model: SplitModel, counts: Sequence[int], store: dict[int, SplitModel], finish: Callable[[SplitModel], None]
) -> Callable[[int], None]:
    """An ``on_epoch_end`` for ``train_server_step`` that puts a copy of ``model``, ended with ``finish`` as the step
    ends its model (BatchNorm statistics settled), in ``store`` after each epoch count in ``counts``: one run gives the
    model after every count (the optimiser continuing, as in separate runs of that many epochs from the same start
    and seed)."""
    wanted = set(counts)

    def hook(done: int) -> None:
        if done in wanted:
            store[done] = global_copy(model)
            finish(store[done])

    return hook


def scores(model: SplitModel, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Test accuracy on all classes and on class 9."""
    model.eval()
    nine = y == 9
    return {
        "all": 100 * evaluate(model, x, y, 500)[1],
        "class9": 100 * evaluate(model, x[nine], y[nine], 500)[1],
    }


def baseline(model: SplitModel, data: Any, rows: np.ndarray, args: argparse.Namespace) -> SplitModel:
    """A Table 5.1 baseline: ``model`` trained on ``rows`` of the training set with the pretraining recipe."""
    config = parse_config(
        {**load_defaults(), "dataset": args.dataset, "pretrain-epochs": args.epochs, "seed": args.seed}
    )
    pretrain(model, data.train.subset(rows), args.dataset, config, torch.device("cpu"))
    return model


def fit(
    model: SplitModel, x: torch.Tensor, y: torch.Tensor, epochs: int, seed: int, step: dict[str, Any] = STEP
) -> SplitModel:
    """``epochs`` of the server steps' SGD on all of ``model`` (the "D_g only" control of Table 5.2), ended as every
    training ends (``models/batchnorm.py``): BatchNorm statistics settled on ``x``, as step 1 ends."""
    train_epochs(
        cross_entropy_of(model.train()),
        list(model.parameters()),
        x,
        y,
        epochs=epochs,
        generator=torch.Generator().manual_seed(seed),
        **step,
    )
    settle_batchnorm(model, x, batch_size=step["batch_size"])
    return model


def after_step1(s: Scenario, step: dict[str, Any], generator: torch.Generator) -> SplitModel:
    """A copy of the global model after step 1 (CE + AT from the client model on D_g at every level)."""
    model = global_copy(s.global_model)
    train_server_step(model, 1, "up", *s.generic, teacher=s.client_model, epochs=AT_EPOCHS, generator=generator, **step)
    return model


def control(s: Scenario, step: dict[str, Any]) -> SplitModel:
    """A copy of the global model after the same epochs as step 1 of plain CE on D_g (no teacher)."""
    return fit(global_copy(s.global_model), *s.generic, AT_EPOCHS, s.seed, step)


def metadata_rows(
    s: Scenario,
    start: SplitModel,
    level: str,
    maps: torch.Tensor,
    labels: torch.Tensor,
    step: dict[str, Any],
    generator: torch.Generator,
) -> dict[str, dict[str, float]]:
    """Step 2 on (``maps``, ``labels``) from a copy of ``start``, then from that step 3 with AT and step 3 without,
    in this order on ``generator``; the scores after each."""
    after2 = global_copy(start)
    train_server_step(after2, 2, level, maps, labels, epochs=METADATA_EPOCHS, generator=generator, **step)
    rows = {"step 2": s.score(after2)}
    for name, levels in (("step 3 with AT", AT_LEVELS), ("step 3 without AT", ())):
        after3 = global_copy(after2)
        train_server_step(
            after3,
            3,
            level,
            *s.generic,
            teacher=s.client_model,
            epochs=AT_EPOCHS,
            at_levels=levels,
            generator=generator,
            **step,
        )
        rows[name] = s.score(after3)
    return rows


def client_maps(s: Scenario, level: str) -> torch.Tensor:
    """D_1,meta: the client model's feature maps at ``level`` for all of D_1."""
    return extract_in_batches(s.client_model, s.client[0], level, 500)


def step2_snapshots(
    start: SplitModel,
    level: str,
    maps: torch.Tensor,
    labels: torch.Tensor,
    counts: Sequence[int],
    step: dict[str, Any],
    generator: torch.Generator,
) -> dict[int, SplitModel]:
    """Step 2 alone from a copy of ``start``, max(counts) epochs in one run; copies of the model after each count."""
    model, store = global_copy(start), dict[int, SplitModel]()
    hook = snapshot_hook(
        model, counts, store, lambda copy: settle_trained_part(copy, 2, level, maps, step["batch_size"])
    )
    train_server_step(model, 2, level, maps, labels, epochs=max(counts), generator=generator, on_epoch_end=hook, **step)
    return store


def table5_3(s: Scenario, step1: SplitModel) -> dict[str, dict[str, dict[str, float]]]:
    """Table 5.3: step 2 on up-level metadata (of class 9 only, or of all classes) from the step-1 model; the scores
    after each epoch count, taken from one run per case (the thesis does not say whether its counts are separate
    runs; from the same start and seed they are the same)."""
    maps, labels = client_maps(s, "up"), s.client[1]
    out = {}
    for name, wanted, counts in TABLE5_3:
        rows = class_positions(labels, wanted)
        snaps = step2_snapshots(step1, "up", maps[rows], labels[rows], counts, STEP, fresh_rng(s.seed))
        out[f"table5.3 (metadata at up): {name} ({len(rows)} maps)"] = {
            f"step 2, {n} epoch{'s' * (n > 1)}": s.score(snaps[n]) for n in counts
        }
    return out


def fig5_10(s: Scenario, step1: SplitModel) -> dict[str, dict[str, dict[str, float]]]:
    """Fig. 5.10: steps 2 and 3 (with and without AT) from the step-1 model on a random share of the low-level
    metadata, each share a fresh chain."""
    maps, labels = client_maps(s, "low"), s.client[1]
    out = {}
    for share in FIG5_10_SHARES:
        rows = torch.from_numpy(share_positions(len(labels), share, s.seed))
        key = f"fig5.10 (metadata at low): {share:.0%} of D_1,meta ({len(rows)} maps)"
        out[key] = metadata_rows(s, step1, "low", maps[rows], labels[rows], STEP, fresh_rng(s.seed))
    return out


def with_bn_refresh(score: Score, inputs: torch.Tensor) -> Score:
    """``score`` that also scores a copy of the model whose BatchNorm running statistics are re-estimated on
    ``inputs`` (D_g) with dropout off, as pretraining does after each epoch, under ``all_bn`` and ``class9_bn``: it
    tells what a server step did to the weights from what it did to the BatchNorm statistics. The model is left
    as ``score`` leaves it."""

    def both(model: SplitModel) -> dict[str, float]:
        plain = score(model)
        refreshed = global_copy(model)
        settle_batchnorm(refreshed, inputs, batch_size=500)
        return {**plain, **{f"{k}_bn": v for k, v in score(refreshed).items()}}

    return both


def server_settings(
    s: Scenario, with_metadata: bool, settings: dict[str, dict[str, Any]] = SERVER_SETTINGS
) -> dict[str, dict[str, dict[str, float]]]:
    """``server_lr``: for each of ``settings``, step 1 and the control and, if ``with_metadata``, steps 2–3 on
    low-level metadata from that step 1, every step with that server optimiser; a fresh chain per setting."""
    maps = client_maps(s, "low") if with_metadata else None
    out = {}
    for name, step in settings.items():
        generator = fresh_rng(s.seed)
        step1 = after_step1(s, step, generator)
        rows = {"step 1 (AT on D_g)": s.score(step1)}
        if maps is not None:
            low = metadata_rows(s, step1, "low", maps, s.client[1], step, generator)
            rows |= {f"metadata at low: {k}": v for k, v in low.items()}
        fresh_rng(s.seed)
        rows["D_g only, same epochs"] = s.score(control(s, step))
        out[name] = rows
    return out


def scenario_results(
    scenario: str,
    data: Any,
    info: Any,
    args: argparse.Namespace,
    test: tuple[torch.Tensor, torch.Tensor],
    parts: Sequence[str] = PARTS,
) -> dict[str, Any]:
    """Every row of one scenario: the baselines, step 1 and the control, then the chosen ``parts``."""
    generic, client = split_generic(data.train.labels, scenario, args.client_share, args.seed, args.generic_share)
    images = to_model_input(data.train.images, info)
    labels = torch.from_numpy(data.train.labels)
    torch.manual_seed(args.seed)
    global_model = baseline(build_model(args.global_model, info.channels, info.num_classes), data, generic, args)
    client_model = build_model(args.client_model, info.channels, info.num_classes)
    if args.client_init == "global":
        client_model.load_state_dict(inherit_from_global(client_model.state_dict(), global_model.state_dict()))
    client_model = baseline(client_model, data, client, args)
    s = Scenario(
        global_model,
        client_model,
        (images[generic], labels[generic]),
        (images[client], labels[client]),
        functools.partial(scores, x=test[0], y=test[1]),
        args.seed,
    )
    out: dict[str, Any] = {
        "sizes": {"generic": len(generic), "client": len(client)},
        "table5.1": {"global on D_g": s.score(global_model), "client on D_1": s.score(client_model)},
    }
    seconds: dict[str, float] = {}
    tick = time.perf_counter()
    gen = torch.Generator().manual_seed(args.seed)
    step1 = after_step1(s, STEP, gen)
    out["table5.2"] = {"step 1 (AT on D_g)": s.score(step1), "D_g only, same epochs": s.score(control(s, STEP))}
    if "fig5_9" in parts:
        for level in args.levels:
            out[f"metadata at {level}"] = metadata_rows(s, step1, level, client_maps(s, level), s.client[1], STEP, gen)
    seconds["step 1, control, fig5_9"] = time.perf_counter() - tick
    if scenario == "non-iid":
        for name, part in (("table5_3", table5_3), ("fig5_10", fig5_10)):
            if name in parts:
                tick = time.perf_counter()
                out |= part(s, step1)
                seconds[name] = time.perf_counter() - tick
    if "server_lr" in parts:
        tick = time.perf_counter()
        out |= server_settings(s, with_metadata=scenario == "non-iid")
        seconds["server_lr"] = time.perf_counter() - tick
    if "bn_refresh" in parts:
        tick = time.perf_counter()
        refreshing = replace(s, score=with_bn_refresh(s.score, s.generic[0]))
        rows = server_settings(refreshing, with_metadata=scenario == "non-iid", settings=BN_SETTINGS)
        out |= {f"bn_refresh: {name}": r for name, r in rows.items()}
        seconds["bn_refresh"] = time.perf_counter() - tick
    out["seconds"] = seconds
    return out


def markdown(results: dict[str, Any]) -> str:
    """One row per (scenario, part, row name): accuracy on all classes and on class 9."""
    lines = ["| scenario | model / step | acc. all (%) | acc. class 9 (%) |", "|---|---|---|---|"]
    for scenario, parts in results["scenarios"].items():
        for part, rows in parts.items():
            if part in ("sizes", "seconds"):
                continue
            for name, s in rows.items():
                lines.append(f"| {scenario} | {part}: {name} | {s['all']:.2f} | {s['class9']:.2f} |")
                if "all_bn" in s:
                    lines.append(
                        f"| {scenario} | {part}: {name}, then BatchNorm statistics re-estimated on D_g | "
                        f"{s['all_bn']:.2f} | {s['class9_bn']:.2f} |"
                    )
    return "\n".join(lines) + "\n"


def parse_parts(text: str) -> list[str]:
    """``--parts``: a comma-separated subset of PARTS."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    return parts


def write(results: dict[str, Any], out: Path) -> None:
    """``results.json`` and ``results.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(markdown(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.fedat_single_client",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dataset", default="fashion-mnist-mini")
    parser.add_argument("--global-model", default="wrn-16-1")
    parser.add_argument("--client-model", default="wrn-10-1")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the Table 5.1 baselines")
    parser.add_argument("--client-share", type=float, default=0.2, help="non-IID: share of classes 0-8 in D_1")
    parser.add_argument(
        "--generic-share", type=float, default=1.0, help="non-IID: share of each of classes 0-8 kept in D_g"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", nargs="+", default=["iid", "non-iid"])
    parser.add_argument("--parts", type=parse_parts, default=list(PARTS), help=f"comma-separated: {','.join(PARTS)}")
    parser.add_argument(
        "--client-init",
        choices=CLIENT_INITS,
        default="global",
        help="the client model's start: the trained global model reduced to its architecture, or fresh",
    )
    parser.add_argument("--levels", type=parse_levels, default=AT_LEVELS, help="fig5_9's metadata levels, e.g. low")
    parser.add_argument("--out", type=Path, default=Path("measurements/experiments/fedat-single-client"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    info = DATASETS[args.dataset]
    data = load_dataset(args.dataset)
    test = (to_model_input(data.test.images, info), torch.from_numpy(data.test.labels))
    tick = time.perf_counter()
    results: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "scenarios": {}}
    for scenario in args.scenarios:
        results["scenarios"][scenario] = scenario_results(scenario, data, info, args, test, args.parts)
        results["seconds"] = time.perf_counter() - tick
        write(results, args.out)
        print(scenario, json.dumps(results["scenarios"][scenario]), flush=True)
    print(f"wrote {args.out}/results.json and results.md ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
