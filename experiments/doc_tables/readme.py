"""The README's result paragraphs: the default run (``measurements/experiments/default-run``, rewritten whenever the
default run is rerun), why the default start is pretrained on another domain, and FedEntOpt's cohort choice."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.doc_tables.blocks import Block, prose
from experiments.doc_tables.recorded import (
    RecordedCell,
    cheaper_at_every_level,
    load,
    mean_of,
    number,
    paired_text,
    pct,
    rounds_ahead,
    signed,
    span,
    thousands,
)
from experiments.summary import mean_std

DEFAULT_RUN = "default-run"
EDS, EDS_50, FEDAVG = "fedft-eds", "fedft-eds-50", "fedavg"


def _seconds(values: dict[int, float]) -> str:
    """``180 ± 50``: client seconds to the nearest ten (the machine's load moves the rest)."""
    mean, std = mean_std(list(values.values()))
    return thousands(round(mean, -1)) + ("" if std is None else f" ± {thousands(round(std, -1))}")


def _seeds(count: int, of: int) -> str:
    return f"every seed ({count}/{of})" if count == of else f"{count} of {of} seeds"


def default_run() -> str:
    """The default run's figures and paragraph: FedFT-EDS beside FedAvg from one start, over the recorded seeds."""
    run = load(DEFAULT_RUN)
    eds, avg = run.cells_of(EDS), run.cells_of(FEDAVG)
    seeds, rounds = len(eds), run.rounds
    start = [c.value("initial_accuracy") for c in run.cells]
    per_client = mean_of([mean_of(c.series("num_examples")) for c in eds.values()]) / run.clients
    wins, compared = rounds_ahead(avg, eds)
    ahead_text = (
        "is ahead of it in every round of every seed"
        if wins == compared
        else f"is ahead of it in {wins} of the {compared} rounds of the {seeds} seeds"
    )
    best_gap = run.paired(EDS, FEDAVG, "best_accuracy")
    eds_seconds, avg_seconds = (
        run.values(EDS, "total_client_train_seconds"),
        run.values(FEDAVG, "total_client_train_seconds"),
    )
    ratio = mean_of(avg_seconds) / mean_of(eds_seconds)
    cheaper = cheaper_at_every_level(eds, avg)
    figures = [
        "![FedFT-EDS beside FedAvg from the same start](measurements/experiments/default-run/accuracy_vs_round.png)",
        "![the same runs against the clients' training seconds]"
        "(measurements/experiments/default-run/accuracy_vs_client_seconds.png)",
    ]
    lines = [
        f"`make run`'s setting beside FedAvg, from the same start, over {seeds} seeds "
        "([default_run.yaml](experiments/default_run.yaml), "
        "[summary](measurements/experiments/default-run/summary.md)); "
        f"the start scores {span(start)}% on the test set{_start_text(run.cells)}. FedFT-EDS, which trains θ on "
        f"about {per_client:.0f} of "
        f"each client's highest-entropy samples a round, reaches {pct(mean_of(run.values(EDS, 'best_accuracy')))}% "
        f"at best in {rounds} rounds (mean over the seeds); FedAvg, the whole model on all local data, reaches "
        f"{pct(mean_of(run.values(FEDAVG, 'best_accuracy')))}% and {ahead_text}: FedFT-EDS − FedAvg "
        f"{paired_text(best_gap)} points of best accuracy (seeds ahead).",
    ]
    if EDS_50 in run.methods:
        gap_50 = run.paired(EDS_50, FEDAVG, "best_accuracy")
        lines.append(
            "FedFT-EDS on 50% of each client's data (the paper's Table IV, pretrained on another domain, reports "
            f"10% and 50%) reaches {pct(mean_of(run.values(EDS_50, 'best_accuracy')))}%, {paired_text(gap_50)} "
            "points from FedAvg."
        )
    lines += [
        f"What FedFT-EDS saves is the clients' work: {_seconds(eds_seconds)} client training seconds for the whole "
        f"run against FedAvg's {_seconds(avg_seconds)} (summed over clients and rounds; seconds depend on the machine "
        f"and its load, so read the ratio, about {ratio:.0f}×, not the seconds), and on {_seeds(cheaper, seeds)} it "
        "reached each accuracy it reached with fewer client seconds than FedAvg needed for it (the second figure). "
        "The FedFT-EDS paper (Table II) has FedFT-EDS ending more accurate than FedAvg; here "
        + _verdict(best_gap, run.paired(EDS, FEDAVG, "final_accuracy"))
        + " ([docs/results.md](docs/results.md#each-method-beside-its-baseline-3-seeds) has the seeds, random "
        "selection (FedFT-RDS) beside entropy selection, and what is known of why; the paper's Table II from a "
        "two-step start of its own, on the full set with LeNet-5, is [there too](docs/results.md"
        "#fedft-eds-paper-table-ii-from-the-pretraining-phases-two-steps-lenet-5-full-set)).",
        f"These runs were computed on {' and on '.join(sorted({c.machine for c in run.cells}))}: on another kind of "
        "CPU, or with another number of threads, the same command pretrains to another start, and its figures differ "
        "([Reproducible starts](docs/configuration.md#reproducible-starts)).",
    ]
    return "\n".join([*figures, "", prose(*lines)])


def _start_text(cells: Sequence[RecordedCell]) -> str:
    """How the start was made, where the cells recorded a pretraining round: what the server's pretraining alone
    scored, and what the round cost the clients."""
    rounds = [c for c in cells if c.summary.get("pretraining_round.accuracy") is not None]
    if not rounds:
        return ""
    pretrained = [c.value("pretraining_round.pretrained_accuracy") for c in rounds]
    seconds = {c.seed: c.value("pretraining_round.client_train_seconds") for c in rounds}
    return (
        f" after the pretraining round (thesis §6.4.1: the server's MNIST-pretrained model, {span(pretrained)}% with "
        "its new head, is trained to convergence by every client once and averaged; "
        f"{_seconds(seconds)} client seconds a seed, counted apart from the rounds' below)"
    )


def _verdict(best: dict[int, float], final: dict[int, float]) -> str:
    """Whether a method was ahead of its baseline at its best and at the end, in words, from the per-seed
    differences of best and of final accuracy."""

    def seeds(differences: dict[int, float]) -> str:
        wins = sum(d > 0 for d in differences.values())
        return "every seed" if wins == len(differences) else f"{wins} of {len(differences)} seeds"

    return f"its best accuracy is above FedAvg's on {seeds(best)} and its final accuracy on {seeds(final)}"


TASK_START = "fedft-table2-full"  # LeNet-5 pretrained on the server's Fashion-MNIST split (the earlier default start)
MNIST_START = "fedft-table2-full-2026-11-27"  # the same file from the MNIST start


def _spread(folder: str) -> tuple[float, float]:
    """The least and the largest spread (points) of the presets' best accuracies at one seed and split."""
    run = load(folder)
    spreads = []
    for alpha in run.grid["dirichlet-alpha"]:
        for seed in run.seeds:
            best = [
                c.value("best_accuracy") for c in run.cells if c.seed == seed and c.point["dirichlet-alpha"] == alpha
            ]
            if len(best) > 1:
                spreads.append(100 * (max(best) - min(best)))
    return min(spreads), max(spreads)


def cross_domain() -> str:
    """Why the default start is pretrained on MNIST, a far domain, rather than the clients' own distribution, from the
    LeNet-5 runs of the FedFT-EDS paper's Table II on the full Fashion-MNIST set from each of the two starts."""
    task, mnist = load(TASK_START), load(MNIST_START)
    pretrained = [c for c in task.cells if c.method != "fedavg-no-pretraining"]
    gains = [c.value("best_accuracy") - c.value("initial_accuracy") for c in pretrained]
    fedavg_gains = [c.value("best_accuracy") - c.value("initial_accuracy") for c in task.cells if c.method == "fedavg"]
    starts = [c.value("initial_accuracy") for c in pretrained]
    task_low, task_high = _spread(TASK_START)
    mnist_low, mnist_high = _spread(MNIST_START)
    mnist_starts = [c.value("initial_accuracy") for c in mnist.cells if c.method != "fedavg-no-pretraining"]
    fedavg_seeds = sorted({c.seed for c in task.cells if c.method == "fedavg"})
    return prose(
        "**Why MNIST for a Fashion-MNIST task.** The paper's Table II pretrains on a source domain *close to* the "
        'federated task (Small ImageNet for CIFAR, §IV-C, "Close-Domain Evaluation"; thesis §6.4.1: "a source '
        'domain closely related to the FL task"), its Table IV on a far one (Small ImageNet for speech, §IV-G). '
        "This machine holds no close source for Fashion-MNIST offline: the server's own Fashion-MNIST split is the "
        "task's own distribution, and MNIST (digits against clothing) is a far domain, Table IV's setting rather than "
        "Table II's. Measured from the server's pretraining alone (before the pretraining round existed) with LeNet-5 "
        "(no BatchNorm, so its runs stand under today's scoring) on the full Fashion-MNIST set, 10 clients Dir(0.1) "
        f"and Dir(0.5), 10 rounds ([{TASK_START}](measurements/experiments/{TASK_START}/summary.md)): from the "
        f"server's own Fashion-MNIST split ({span(starts)}% at the start), FedAvg's best round differed from the "
        f"start by {' and '.join(signed(100 * g) for g in fedavg_gains)} points (seed "
        f"{', '.join(map(str, fedavg_seeds))}; Dir(0.1), Dir(0.5)), every preset's by between "
        f"{signed(100 * min(gains))} and "
        f"{signed(100 * max(gains))}, and at each seed and split the presets' best accuracies lay within "
        f"{number(task_low)}–{number(task_high)} points of one another: such a start leaves the rounds little to "
        "teach and the methods little to tell apart. From MNIST "
        f"({span(mnist_starts)}% at the start; [{MNIST_START}](measurements/experiments/{MNIST_START}/summary.md)) "
        f"they spread over {number(mnist_low)}–{number(mnist_high)} points. So the default run pretrains on MNIST: "
        "the figure below shows what each method learns from the clients and at what cost to them, from a far-domain "
        "start that the paper's Table II does not test."
    )


def fedentopt() -> str:
    """FedEntOpt's cohort choice against random selection (``fedentopt-mini``)."""
    run = load("fedentopt-mini")
    last10 = run.paired("fedentopt", "random", "mean_last10_accuracy")
    rounds = run.rounds
    wins = sum(d > 0 for d in last10.values())
    return prose(
        "**FedEntOpt** changes which clients train, not how: on 20 clients with 4 a round, from random weights, as "
        "in its paper (LeNet-5, FedAvg's local training with lr 0.01, momentum 0.9, lr × 0.98 a round), choosing "
        "the cohort for maximal label entropy instead of at random moved the mean test accuracy of the last 10 of "
        f"{rounds} rounds by {paired_text(last10, seeds=False)} points, ahead on {wins} of {len(last10)} seeds "
        "([fedentopt-mini](measurements/experiments/fedentopt-mini/summary.md)); the log names each round's cohort "
        "and its label entropy:"
    )


BLOCKS: dict[str, Block] = {"cross-domain": cross_domain, "default-run": default_run, "fedentopt-mini": fedentopt}
