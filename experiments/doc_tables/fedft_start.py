"""docs/results.md's FedFT-EDS comparisons from the pretraining phase's two steps (thesis §6.4.1): the server's
pretraining, then the pretraining round, the start every compared method shares (thesis Table 6.4)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from experiments.doc_tables import fedft
from experiments.doc_tables.blocks import bullet, prose
from experiments.doc_tables.markdown import bold_largest, table, verdict
from experiments.doc_tables.recorded import (
    RecordedCell,
    RecordedExperiment,
    load,
    mean_of,
    mean_pm,
    number,
    paired_text,
    per_seed,
    signed,
    span,
)
from experiments.summary import mean_std

TABLE2_FULL = "fedft-table2-full-2026-11-28"
BEST, LAST10 = "best_accuracy", "mean_last10_accuracy"
SECONDS = "total_client_train_seconds"
ALPHAS = (0.1, 0.5)
#: Table II's rows: label, the experiment's method, P_ds (%).
ROWS = (
    ("FedAvg", "fedavg", 100),
    ("FedProx (μ = 0.01)", "fedprox", 100),
    ("FedAvg-RDS", "fedavg-rds", 10),
    ("FedFT-ALL", "fedft-all", 100),
    ("FedFT-RDS", "fedft-rds", 10),
    ("FedFT-EDS", "fedft-eds", 10),
    ("FedFT-RDS", "fedft-rds-50", 50),
    ("FedFT-EDS", "fedft-eds-50", 50),
)
#: The paper's CIFAR-10 best accuracies of Table II at α = 0.1 and 0.5, per method (``fedft.TABLE2``).
_PAPER2 = {method: (float(a01), float(a05)) for _, method, _, a01, a05 in fedft.TABLE2 if a01 != "–"}


def _paper_difference(method: str, baseline: str) -> tuple[float, float] | None:
    """The paper's Table II difference method − baseline at α = 0.1 and 0.5 (None where it has no such row)."""
    if method not in _PAPER2 or baseline not in _PAPER2:
        return None
    return (_PAPER2[method][0] - _PAPER2[baseline][0], _PAPER2[method][1] - _PAPER2[baseline][1])


#: The paper's claims as paired comparisons: the claim, method, baseline, and the paper's CIFAR-10 difference at
#: α = 0.1 and 0.5 (Table II, points; None where the paper has no such row).
CLAIMS: tuple[tuple[str, str, str, tuple[float, float] | None], ...] = tuple(
    (claim, method, baseline, _paper_difference(method, baseline))
    for claim, method, baseline in (
        ("FedFT-EDS > FedFT-RDS (10%)", "fedft-eds", "fedft-rds"),
        ("FedFT-EDS > FedFT-RDS (50%)", "fedft-eds-50", "fedft-rds-50"),
        ("FedFT-RDS > FedAvg-RDS (10%)", "fedft-rds", "fedavg-rds"),
        ("FedFT-EDS (10%) > FedAvg", "fedft-eds", "fedavg"),
        ("FedFT-EDS (10%) > FedProx", "fedft-eds", "fedprox"),
    )
)
#: Fewer seeds than this get no verdict (the rules of docs/results.md's first table are over 3 seeds).
VERDICT_SEEDS = 3
#: The rounds compared for "EDS's gain shows most in the first rounds" (paper §IV-F): the first and the last five.
EARLY = 5
#: Local epochs of a round (the file's E).
LOCAL_EPOCHS = 5


def _at(alpha: float) -> dict[str, object]:
    return {"dirichlet-alpha": alpha}


def _verdict(differences: Mapping[int, float]) -> str:
    """The verdict on a claim that the method is ahead, or why there is none yet."""
    if len(differences) < VERDICT_SEEDS:
        return f"none yet ({len(differences)} of {VERDICT_SEEDS} seeds)"
    return f"**{verdict(differences, 1)}**"


def _claim_rows(
    run: RecordedExperiment, claims: Sequence[tuple[str, str, str, Sequence[float] | None]], alphas: Sequence[float]
) -> list[list[str]]:
    """A row per claim and α: best accuracy per seed with mean ± std (seeds ahead), last-10, the paper's difference,
    the verdict."""
    rows = []
    for claim, method, baseline, paper in claims:
        for i, alpha in enumerate(alphas):
            best = run.paired(method, baseline, BEST, _at(alpha))
            last = run.paired(method, baseline, LAST10, _at(alpha))
            rows.append(
                [
                    claim,
                    str(alpha),
                    f"{per_seed(best)}: {paired_text(best)}",
                    paired_text(last),
                    "–" if paper is None else signed(paper[i], 2),
                    _verdict(best),
                ]
            )
    return rows


def claim_header(rounds: int) -> list[str]:
    """The claims table's header; its second measure is the mean of the last 10 rounds (of all, up to 10)."""
    return [
        "the paper's claim",
        "α",
        "best acc., per seed: mean ± std (seeds ahead)",
        "last-10" if rounds > 10 else f"mean of all {rounds} rounds",
        "paper, CIFAR-10",
        "verdict (best acc.)",
    ]


def _client_seconds(run: RecordedExperiment, method: str, alpha: float) -> str:
    """The median over the seeds of a cell's client seconds: one cell that ran beside other work moves it less than
    it moves the mean."""
    return number(statistics.median(run.values(method, SECONDS, _at(alpha)).values()), 0)


def _round_seconds(run: RecordedExperiment, method: str, seeds: set[int], alpha: float) -> float:
    """The median over the rounds of ``seeds`` of the client seconds a round took: robust to the rounds that ran
    beside other work."""
    cells = run.cells_of(method, _at(alpha))
    return statistics.median([v for s in seeds for v in cells[s].series("client_train_seconds")])


def _worst_round(run: RecordedExperiment) -> float:
    """The most a round's client seconds exceeded its cell's median round."""
    return max(
        max(c.series("client_train_seconds")) / statistics.median(list(c.series("client_train_seconds")))
        for c in run.cells
    )


def _pretraining_epochs(cell: RecordedCell) -> list[float]:
    """The epochs each client trained in the pretraining round the cell started from."""
    return [float(v) for k, v in cell.summary.items() if k.startswith("pretraining_round.epochs.")]


def _efficiency(run: RecordedExperiment, method: str, baseline: str, alpha: float) -> tuple[float, float, float]:
    """(method's round seconds ÷ baseline's, learning-efficiency ratio without the pretraining round, with it), from
    the median round seconds and the mean best accuracy over the seeds the pair compares (``paired``: a seed whose
    two runs started apart is refused). ``baseline`` trains the whole model on all local data (FedAvg, FedProx). The
    pretraining round's recorded seconds are the load of the hour it ran, once per seed, so its cost is counted from
    its epochs instead: it trains the whole model on all local data, as a baseline round does for E epochs, so it
    counts as (its mean epochs ÷ E) of the baseline's median round (an estimate: a client's epochs and its data size
    vary together at Dir(0.1))."""
    seeds = set(run.paired(method, baseline, BEST, _at(alpha)))
    best_m, best_b = run.values(method, BEST, _at(alpha)), run.values(baseline, BEST, _at(alpha))
    r_m, r_base = _round_seconds(run, method, seeds, alpha), _round_seconds(run, baseline, seeds, alpha)
    cells = run.cells_of(method, _at(alpha))
    phase = mean_std([e for s in seeds for e in _pretraining_epochs(cells[s])])[0] / LOCAL_EPOCHS * r_base
    acc_m, acc_b = mean_of([best_m[s] for s in seeds]), mean_of([best_b[s] for s in seeds])
    rounds = run.rounds
    plain = (acc_m / (rounds * r_m)) / (acc_b / (rounds * r_base))
    with_phase = (acc_m / (phase + rounds * r_m)) / (acc_b / (phase + rounds * r_base))
    return r_m / r_base, plain, with_phase


def _seeds_of(run: RecordedExperiment, method: str, alpha: float) -> str:
    return ", ".join(map(str, sorted(run.cells_of(method, _at(alpha)))))


def _ran_at(run: RecordedExperiment, method: str, alpha: float) -> bool:
    return any(c.method == method and c.point.get("dirichlet-alpha") == alpha for c in run.cells)


def _epochs_text(epochs: Sequence[float]) -> str:
    """The range of the pretraining round's epochs, e.g. "3–10 epochs" (one number where they are all alike)."""
    low, high = min(epochs), max(epochs)
    return f"{low:.0f} epochs" if low == high else f"{low:.0f}–{high:.0f} epochs"


def _alpha_columns(run: RecordedExperiment, methods: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """A Table II's header and columns per α, one entry per method: its seeds, best and last-10 accuracy (mean ± std,
    the column's largest in bold); "not run yet" and blanks for a method with no cell at that α."""
    header = ["method", "P_ds (%)"]
    columns: list[list[str]] = []
    for alpha in ALPHAS:
        header += [f"Dir({alpha}) seeds", f"Dir({alpha}) best (%)", f"Dir({alpha}) last-10 (%)"]
        ran = [m for m in methods if _ran_at(run, m, alpha)]
        seeds = {m: _seeds_of(run, m, alpha) for m in ran}
        columns.append([seeds.get(m, "not run yet") for m in methods])
        for field in (BEST, LAST10):
            values = [run.values(m, field, _at(alpha)) for m in ran]
            texts = [mean_pm(list(v.values())) for v in values]
            bolded = dict(zip(ran, bold_largest(texts, [mean_of(v) for v in values]) if ran else []))
            columns.append([bolded.get(m, "") for m in methods])
    return header, columns


def _machines(run: RecordedExperiment) -> str:
    """Which seeds each machine computed, e.g. "seeds 0, 1 on <machine>; seed 4 on <machine>, code of 1a2b3c4": a
    start is reproducible only on one kind of CPU (docs/configuration.md, "Reproducible starts"); the commits are
    named where the cells recorded them."""
    groups: dict[str, list[RecordedCell]] = {}
    for cell in run.cells:
        groups.setdefault(cell.machine, []).append(cell)
    texts = []
    for machine, cells in sorted(groups.items(), key=lambda item: min(c.seed for c in item[1])):
        seeds = sorted({c.seed for c in cells})
        text = f"{'seed' if len(seeds) == 1 else 'seeds'} {', '.join(map(str, seeds))} on {machine}"
        if codes := sorted({c.code for c in cells if c.code}):
            some = "" if all(c.code for c in cells) else " (the cells that recorded it)"
            text += f", code of {', '.join(codes)}{some}"
        texts.append(text)
    return "; ".join(texts)


#: The methods ``_efficiency_and_gap_bullets`` compares: a block shows its bullets once each has run at both α.
BULLET_METHODS = (
    "fedft-eds",
    "fedft-rds",
    "fedft-eds-50",
    "fedft-rds-50",
    "fedft-all",
    "fedavg",
    "fedprox",
    "fedavg-rds",
)
#: The whole-model baselines FedFT-EDS's learning efficiency is measured against.
EFFICIENCY_BASELINES = ("fedavg", "fedprox")


def _both(values: Mapping[float, str]) -> str:
    """``a and b``: a figure at Dir(0.1), then at Dir(0.5)."""
    return " and ".join(values[a] for a in ALPHAS)


def _efficiency_and_gap_bullets(run: RecordedExperiment, unexplained: str) -> list[str]:
    """Table II's bullets under its claims: FedFT-EDS's learning efficiency against FedAvg's and FedProx's (with and
    without the pretraining round), EDS − RDS in the first and the last rounds (paper §IV-F), and FedFT-RDS − FedAvg
    split into paired steps in both orders, closed by ``unexplained``: what the steps leave without a reason in this
    setting."""
    early_late = []
    for claim, method, baseline, _ in (CLAIMS[0], CLAIMS[1]):
        for alpha in ALPHAS:
            first = run.paired_rounds(method, baseline, slice(0, EARLY), _at(alpha))
            last = run.paired_rounds(method, baseline, slice(-EARLY, None), _at(alpha))
            early_late.append(
                f"{claim.split(' (')[1].rstrip(')')} at Dir({alpha}): {paired_text(first)} in rounds 1–{EARLY}, "
                f"{paired_text(last)} in the last {EARLY}"
            )
    ratio = {b: {a: _efficiency(run, "fedft-eds", b, a) for a in ALPHAS} for b in EFFICIENCY_BASELINES}

    def part(index: int, style: str, unit: str = "") -> dict[str, str]:
        """One of ``_efficiency``'s three ratios, per baseline, at both α."""
        return {b: _both({a: format(ratio[b][a][index], style) + unit for a in ALPHAS}) for b in EFFICIENCY_BASELINES}

    cost, plain, with_phase = part(0, ".3f"), part(1, ".0f", "×"), part(2, ".1f", "×")
    bullets = [
        bullet(
            "**Learning efficiency** (best accuracy per client second; the paper: FedFT-EDS ≥ 3× FedAvg's on "
            "CIFAR-10), from each method's median client seconds a round over the seeds both ran (a round that ran "
            f"beside other work took up to {_worst_round(run):.0f}× its cell's median; a cell that ran beside it "
            f"throughout moves its median too): a FedFT-EDS round costs {cost['fedavg']} of a FedAvg round's client "
            f"seconds and {cost['fedprox']} of a FedProx round's at Dir(0.1) and Dir(0.5), so FedFT-EDS's learning "
            f"efficiency is {plain['fedavg']} FedAvg's ({plain['fedprox']} FedProx's) over the federated rounds, and "
            f"{with_phase['fedavg']} ({with_phase['fedprox']}) counting the pretraining round, which both pay (every "
            "client trains the whole model until its loss stops improving, counted as its mean epochs ÷ E of the "
            "baseline's rounds)."
        ),
        bullet(
            f"**EDS − RDS over the rounds** (the paper, §IV-F: EDS's gain shows most in the first rounds), mean "
            f"accuracy of the first and the last {EARLY} rounds, points: " + "; ".join(early_late) + "."
        ),
    ]
    gap = {a: run.paired("fedft-rds", "fedavg", BEST, _at(a)) for a in ALPHAS}

    def step(method: str, baseline: str) -> str:
        """The step's paired difference on the seeds of the gap, so that two steps add up to it."""
        return _both(
            {
                a: paired_text({s: d for s, d in run.paired(method, baseline, BEST, _at(a)).items() if s in gap[a]})
                for a in ALPHAS
            }
        )

    bullets.append(
        bullet(
            "**Where FedFT trails FedAvg, what the rows measure** (best accuracy, points, Dir(0.1) and Dir(0.5)): "
            f"the gap FedFT-RDS − FedAvg, {_both({a: paired_text(gap[a]) for a in ALPHAS})}, is fine-tuning θ on "
            f"all data with φ frozen (FedFT-ALL − FedAvg) {step('fedft-all', 'fedavg')}, then training on a random "
            f"10% instead of all (FedFT-RDS − FedFT-ALL) {step('fedft-rds', 'fedft-all')}; or, in the other order, "
            f"training the whole model on a random 10% (FedAvg-RDS − FedAvg) {step('fedavg-rds', 'fedavg')}, then "
            f"freezing φ (FedFT-RDS − FedAvg-RDS) {step('fedft-rds', 'fedavg-rds')}. These split the gap; "
            + unexplained
        )
    )
    return bullets


def _seeds_run(run: RecordedExperiment, methods: Sequence[str], partial: str) -> str:
    """The text "Seeds 0, 1, 2 for every cell" once each method has every seed at both α; ``partial`` until then."""
    complete = all(
        _ran_at(run, m, a) and len(run.cells_of(m, _at(a))) == len(run.seeds) for m in methods for a in ALPHAS
    )
    return f"Seeds {', '.join(map(str, run.seeds))} for every cell" if complete else partial


def table2_full_two_step() -> str:
    """Table II on the full Fashion-MNIST set with LeNet-5, every method from the two-step start: the table, the
    paired differences with a verdict per claim and α, and what they show."""
    run = load(TABLE2_FULL)
    methods = [m for _, m, _ in ROWS]
    header, columns = _alpha_columns(run, methods)
    header += ["client s (median), Dir(0.1) / Dir(0.5)", "MB up"]
    seconds = [" / ".join(_client_seconds(run, m, alpha) for alpha in ALPHAS) for m in methods]
    mb = [number(mean_of(run.values(m, "total_bytes_up", _at(0.1))) / 1e6) for m in methods]
    rows = [[label, str(pds), *(c[i] for c in columns), seconds[i], mb[i]] for i, (label, _, pds) in enumerate(ROWS)]

    pairs = table(claim_header(run.rounds), _claim_rows(run, CLAIMS, ALPHAS))

    cells = run.cells
    pretrained = [c.value("pretraining_round.pretrained_accuracy") for c in cells]
    starts = {
        alpha: [c.value("initial_accuracy") for c in cells if c.point["dirichlet-alpha"] == alpha] for alpha in ALPHAS
    }
    epochs = [e for c in cells for e in _pretraining_epochs(c)]
    seeds_run = _seeds_run(run, methods, "Seeds as listed per cell (the rest have not run yet: the summary names them)")
    setting = prose(
        f"The file's setting ([summary](../measurements/experiments/{TABLE2_FULL}/summary.md), "
        f"[EDS − RDS round by round](../measurements/experiments/{TABLE2_FULL}/paired_difference_vs_round.png)): "
        "LeNet-5, the full Fashion-MNIST training set (6,000 images for the server, 54,000 across 10 clients), full "
        f"participation, {run.rounds} rounds of E = 5, weighted mean. Every method starts from the same model, per "
        "seed and α: the server's pretraining on 6,000 MNIST images with a new head "
        f"({span(pretrained)}% on Fashion-MNIST), then the pretraining round, in which every client trains the whole "
        f"model until its training loss stops improving ({_epochs_text(epochs)}) and the server "
        f"averages ({span(starts[0.1])}% at Dir(0.1), {span(starts[0.5])}% at Dir(0.5)). {seeds_run}, computed "
        f"{_machines(run)}; other work shared the "
        "machine, so client seconds compare within a seed better than across. Mean ± std over the seeds; last-10 is "
        "the mean of rounds "
        f"{run.rounds - 9}–{run.rounds}:"
    )

    bullets = _efficiency_and_gap_bullets(
        run,
        "they do not say why φ frozen after the pretraining round limits LeNet-5 here while the paper's WRN gains, "
        "nor why entropy selection at 10% does not beat random: no reason found in this setting.",
    )
    return "\n".join([setting, "", table(header, rows), "", pairs, "", *bullets])


TABLE3 = "fedft-table3-2026-11-28"
#: Table III's rows: label, the experiment's method (its f_n, P_ds and the paper's figure: ``PAPER_TABLE3``).
TABLE3_ROWS = (
    ("FedAvg without pretraining", "fedavg-no-pretraining"),
    ("FedAvg", "fedavg-deliver-100"),
    ("FedAvg", "fedavg-deliver-20"),
    ("FedAvg", "fedavg-deliver-10"),
    ("FedFT-ALL", "fedft-all"),
    ("FedFT-RDS", "fedft-rds-10"),
    ("FedFT-EDS", "fedft-eds-10"),
    ("FedFT-RDS", "fedft-rds-50"),
    ("FedFT-EDS", "fedft-eds-50"),
)
#: The paper's claims of Table III (§IV-E), as paired comparisons at α = 0.1.
TABLE3_CLAIMS: tuple[tuple[str, str, str, Sequence[float] | None], ...] = tuple(
    (claim, method, baseline, (fedft.PAPER_TABLE3[method][2] - fedft.PAPER_TABLE3[baseline][2],))
    for claim, method, baseline in (
        ("FedFT-EDS > FedFT-RDS (50%)", "fedft-eds-50", "fedft-rds-50"),
        ("FedFT-EDS > FedFT-RDS (10%)", "fedft-eds-10", "fedft-rds-10"),
        ("FedFT-EDS (50%) > FedFT-ALL", "fedft-eds-50", "fedft-all"),
        ("FedAvg loses with stragglers: 100% > 20% delivering", "fedavg-deliver-100", "fedavg-deliver-20"),
        ("FedAvg loses with stragglers: 100% > 10% delivering", "fedavg-deliver-100", "fedavg-deliver-10"),
        ("FedFT-EDS (50%) > FedAvg, 100% delivering", "fedft-eds-50", "fedavg-deliver-100"),
        ("FedFT-EDS (50%) > FedAvg, 20% delivering", "fedft-eds-50", "fedavg-deliver-20"),
        ("FedFT-EDS (50%) > FedAvg, 10% delivering", "fedft-eds-50", "fedavg-deliver-10"),
        ("FedFT-EDS (10%) > FedAvg, 20% delivering", "fedft-eds-10", "fedavg-deliver-20"),
        ("FedFT-EDS (10%) > FedAvg, 10% delivering", "fedft-eds-10", "fedavg-deliver-10"),
        ("pretraining pays: FedAvg > FedAvg without pretraining", "fedavg-deliver-100", "fedavg-no-pretraining"),
    )
)


def _ran(run: RecordedExperiment, method: str) -> bool:
    return any(c.method == method for c in run.cells)


def table3_two_step() -> str:
    """Table III (100 clients, FedAvg with stragglers against FedFT at full participation) from the two-step start:
    the table beside the paper's figures and the paired differences with a verdict per claim; rows and claims whose
    cells have not run yet say so."""
    run = load(TABLE3)
    at = _at(0.1)
    ran = [row for row in TABLE3_ROWS if _ran(run, row[1])]
    texts: list[list[str]] = []
    for field in (BEST, LAST10):
        values = [run.values(m, field, at) for _, m in ran]
        texts.append(bold_largest([mean_pm(list(v.values())) for v in values], [mean_of(v) for v in values]))
    measured = {
        method: [
            _seeds_of(run, method, 0.1),
            texts[0][i],
            texts[1][i],
            _client_seconds(run, method, 0.1),
        ]
        for i, (_, method) in enumerate(ran)
    }
    rows = [
        [label, *fedft.fn_pds(method), *measured.get(method, ["not run yet", "", "", ""]), fedft.paper3(method)]
        for label, method in TABLE3_ROWS
    ]
    header = [
        "method",
        "f_n (%)",
        "P_ds (%)",
        "seeds",
        "best acc. (%)",
        f"mean of all {run.rounds} rounds (%)" if run.rounds <= 10 else "last-10 (%)",
        "client s (median)",
        "paper, CIFAR-10 α = 0.1 (%)",
    ]
    claims = [c for c in TABLE3_CLAIMS if _ran(run, c[1]) and _ran(run, c[2])]
    waiting = [c[0] for c in TABLE3_CLAIMS if c not in claims]
    started = [c for c in run.cells if c.method != "fedavg-no-pretraining"]
    pretrained = [c.value("pretraining_round.pretrained_accuracy") for c in started]
    starts = [c.value("initial_accuracy") for c in started]
    epochs = [e for c in started for e in _pretraining_epochs(c)] or [math.nan]
    setting = prose(
        f"The file's setting ([summary](../measurements/experiments/{TABLE3}/summary.md), [the paired differences "
        f"round by round](../measurements/experiments/{TABLE3}/paired_difference_vs_round.png)): WRN-16-1, the "
        "Fashion-MNIST "
        "mini set's 5,400 client images split Dir(0.1) over 100 clients (`min-partition-size: 3`), "
        f"{run.rounds} rounds, weighted mean. FedAvg trains the whole model with every client selected and only "
        "f_n of them delivering each round (the others drop out, redrawn every round); the FedFT variants fine-tune "
        "θ at full participation. Every method but FedAvg without pretraining starts from the two-step start of its "
        f"seed: the server's MNIST pretraining ({span(pretrained)}% on Fashion-MNIST), then the pretraining round over "
        f"all 100 clients ({_epochs_text(epochs)} each; {span(starts)}% after it); FedAvg without "
        "pretraining starts from random weights. The seeds are the first three whose split gives every client 3 "
        "images (`experiments check` refuses seeds 1, 2, 3 and 5), chosen before any cell ran; "
        + (f"{len(run.missing)} cells not run yet are named in the summary. " if run.missing else "every cell ran. ")
        + "Some cells ran beside other work, so client seconds compare within a seed better than across; the "
        "column is their median over the seeds. Mean ± std over the seeds, and the paper's CIFAR-10 figures (Table "
        "III, α = 0.1):"
    )
    parts = [setting, "", table(header, rows), "", table(claim_header(run.rounds), _claim_rows(run, claims, (0.1,)))]
    if waiting:
        parts += ["", prose(f"Not compared yet (a cell of the pair has not run): {'; '.join(waiting)}.")]
    return "\n".join(parts)


TABLE2_MINI = "fedft-table2-2026-11-29"
#: Table II on the mini set with WRN-16-1: ``ROWS`` and the two rows only this file runs.
MINI_ROWS = (
    ("FedAvg without pretraining", "fedavg-no-pretraining", 100),
    *ROWS[:3],
    ("FedProx-RDS (μ = 0.01)", "fedprox-rds", 10),
    *ROWS[3:],
)
MINI_CLAIMS = (
    *CLAIMS,
    (
        "pretraining pays: FedAvg > FedAvg without pretraining",
        "fedavg",
        "fedavg-no-pretraining",
        _paper_difference("fedavg", "fedavg-no-pretraining"),
    ),
)


def table2_mini_two_step() -> str:
    """Table II on the mini set with WRN-16-1 (the paper's model) from the two-step start: the cells run so far per
    α, and the paired differences of the claims whose two cells both ran; rows and claims not run yet say so."""
    run = load(TABLE2_MINI)
    header, columns = _alpha_columns(run, [m for _, m, _ in MINI_ROWS])
    header.append("client s (median), Dir(0.1) / Dir(0.5)")
    seconds = [
        " / ".join(_client_seconds(run, m, a) if _ran_at(run, m, a) else "–" for a in ALPHAS) for _, m, _ in MINI_ROWS
    ]
    rows = [[label, str(pds), *(c[i] for c in columns), seconds[i]] for i, (label, _, pds) in enumerate(MINI_ROWS)]
    claim_rows, waiting = [], []
    for claim in MINI_CLAIMS:
        for i, alpha in enumerate(ALPHAS):
            if _ran_at(run, claim[1], alpha) and _ran_at(run, claim[2], alpha):
                paper = None if claim[3] is None else (claim[3][i],)  # the paper's figure at this α
                claim_rows += _claim_rows(run, [(*claim[:3], paper)], (alpha,))
            else:
                waiting.append(f"{claim[0]} at Dir({alpha})")
    started = [c for c in run.cells if c.method != "fedavg-no-pretraining"]
    pretrained = [c.value("pretraining_round.pretrained_accuracy") for c in started]
    starts = {a: [c.value("initial_accuracy") for c in started if c.point["dirichlet-alpha"] == a] for a in ALPHAS}
    epochs = [e for c in started for e in _pretraining_epochs(c)]
    after = ", ".join(f"{span(starts[a])}% at Dir({a})" for a in ALPHAS if starts[a])
    seeds_run = _seeds_run(
        run, [m for _, m, _ in MINI_ROWS], f"Seeds as listed per cell, of the file's {', '.join(map(str, run.seeds))}"
    )
    setting = prose(
        f"The file's setting ([summary](../measurements/experiments/{TABLE2_MINI}/summary.md), [the paired "
        f"differences round by round](../measurements/experiments/{TABLE2_MINI}/paired_difference_vs_round.png)): "
        "WRN-16-1, the Fashion-MNIST mini set (600 images for the server, 5,400 across 10 clients), full "
        "participation, "
        f"{run.rounds} rounds of E = 5, weighted mean. Every method but FedAvg without pretraining (random weights) "
        "starts from its seed's two-step start: the server's pretraining on 6,000 MNIST images with a new head "
        f"({span(pretrained)}% on Fashion-MNIST), then the pretraining round, every client training the whole model "
        f"until its training loss stops improving ({_epochs_text(epochs)}; {after} after it). "
        f"{seeds_run}; computed {_machines(run)}, "
        "some cells beside other work, so their client seconds measure that load too. "
        f"Mean ± std over the seeds; last-10 is the mean of rounds {run.rounds - 9}–{run.rounds}:"
    )
    parts = [setting, "", table(header, rows), "", table(claim_header(run.rounds), claim_rows)]
    if waiting:
        parts += ["", prose(f"Not compared yet (a cell of the pair has not run): {'; '.join(waiting)}.")]
    if all(_ran_at(run, m, a) for m in BULLET_METHODS for a in ALPHAS):
        parts += [
            "",
            *_efficiency_and_gap_bullets(
                run,
                "no run of this file measures why the steps cost what they do on WRN-16-1, nor why entropy "
                "selection at 10% does not beat random: no reason found in this setting.",
            ),
        ]
    return "\n".join(parts)
