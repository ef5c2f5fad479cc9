"""Active-learning results of an experiment (KAFAL cells, which write cycles.jsonl): test accuracy at each cycle's
end against the labelled share it trained on, per method, mean ± std over seeds (the KAFAL paper's Fig. 4 and 14,
Tables 2-3); and the paper's Table 1, the rounds each method needs to reach a reference method's accuracy.

``labelled_accuracy.md`` holds the table and, for the file's ``compare`` pairs, the paired differences per seed at
every cycle (the summary's paired table compares only the final accuracy, the last cycle's);
``accuracy_vs_labelled.png`` the figure (one panel per grid point) and, for experiments that name
``rounds-to-reach``, ``rounds_to_reach.md`` holds Table 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.cell_results import CellResult
from experiments.method_styles import method_styles
from experiments.spec import Cell, Experiment
from experiments.summary import mean_std
from methods.kafal.results import CYCLES

TABLE_FILE, FIGURE_FILE, ROUNDS_TABLE_FILE = "labelled_accuracy.md", "accuracy_vs_labelled.png", "rounds_to_reach.md"


#: (grid-point label, method) -> per cycle: (labelled shares trained on, accuracies), one entry per seed
CycleCurves = dict[tuple[str, str], list[list[tuple[float, float]]]]


def cycle_curves(experiment: Experiment, cycles: Mapping[Cell, list[dict[str, Any]]]) -> CycleCurves:
    """Each method's (trained labelled share, accuracy) per cycle and seed, in the file's order."""
    curves: CycleCurves = {}
    for cell in experiment.cells:
        rows = cycles.get(cell)
        if rows:
            curve = [(float(r["trained_labelled_fraction"]), float(r["accuracy"])) for r in rows]
            curves.setdefault((cell.point_label, cell.method), []).append(curve)
    return curves


def cycle_stats(seeds: Sequence[list[tuple[float, float]]]) -> list[tuple[float, float, float | None]]:
    """Per cycle that every seed reached: mean labelled share, mean accuracy and its std over seeds."""
    length = min(len(s) for s in seeds)
    stats = []
    for index in range(length):
        share = float(np.mean([s[index][0] for s in seeds]))
        mean, std = mean_std([s[index][1] for s in seeds])
        stats.append((share, mean, std))
    return stats


def labelled_table(curves: CycleCurves) -> str:
    """Markdown: one row per grid point and method, one column per cycle (its mean labelled share)."""
    lines = []
    for point in dict.fromkeys(p for p, _ in curves):
        methods = {m: cycle_stats(s) for (p, m), s in curves.items() if p == point}
        width = max(len(s) for s in methods.values())
        reference = next(s for s in methods.values() if len(s) == width)
        header = [f"{100 * share:.1f}%" for share, _, _ in reference]
        if point:
            lines += [f"**{point}**", ""]
        lines += ["| method | seeds | " + " | ".join(header) + " |", "|---|---|" + "---|" * width]
        for method, stats in methods.items():
            seeds = len(curves[(point, method)])
            cells = [f"{100 * m:.2f} ± {100 * s:.2f}" if s is not None else f"{100 * m:.2f}" for _, m, s in stats]
            lines.append(f"| {method} | {seeds} | " + " | ".join(cells + [""] * (width - len(cells))) + " |")
        lines.append("")
    return "\n".join(lines)


def cycle_paired_table(
    curves: CycleCurves, seeds: Mapping[tuple[str, str], Sequence[int]], compare: Mapping[str, str]
) -> str:
    """Markdown: per grid point, ``compare`` pair and cycle, method − baseline accuracy on each seed both ran (same
    split, start and draws), in percentage points, with their mean ± std and the seeds the method is ahead on.

    ``seeds`` gives, per (grid point, method), the seed of each of its curves in ``curves``."""
    lines = [
        "| grid point | method − baseline | cycle | labelled | per seed (pts) | mean ± std (seeds ahead) |",
        "|---|---|---|---|---|---|",
    ]
    for point in dict.fromkeys(p for p, _ in curves):
        for method, baseline in compare.items():
            if (point, method) not in curves or (point, baseline) not in curves:
                continue
            ours = dict(zip(seeds[(point, method)], curves[(point, method)]))
            theirs = dict(zip(seeds[(point, baseline)], curves[(point, baseline)]))
            common = [s for s in ours if s in theirs]
            if not common:
                continue
            for cycle in range(min(min(len(ours[s]), len(theirs[s])) for s in common)):
                differences = [ours[s][cycle][1] - theirs[s][cycle][1] for s in common]
                share = float(np.mean([ours[s][cycle][0] for s in common]))
                mean, std = mean_std(differences)
                spread = "" if std is None else f" ± {100 * std:.2f}"
                ahead = sum(d > 0 for d in differences)
                lines.append(
                    f"| {point or '–'} | {method} − {baseline} | {cycle} | {100 * share:.1f}% | "
                    + ", ".join(f"{100 * d:+.2f}" for d in differences)
                    + f" (seeds {', '.join(map(str, common))}) | {100 * mean:+.2f}{spread} ({ahead}/{len(common)}) |"
                )
    return "\n".join(lines) + "\n"


def curve_seeds(
    experiment: Experiment, cycles: Mapping[Cell, list[dict[str, Any]]]
) -> dict[tuple[str, str], list[int]]:
    """The seed of each curve ``cycle_curves`` gives, per (grid point, method), in the same order."""
    seeds: dict[tuple[str, str], list[int]] = {}
    for cell in experiment.cells:
        if cycles.get(cell):
            seeds.setdefault((cell.point_label, cell.method), []).append(cell.seed)
    return seeds


def labelled_figure(curves: CycleCurves, methods: Sequence[str]) -> Any:
    """One panel per grid point: accuracy (mean ± std over seeds) against the labelled share trained on."""
    from matplotlib.figure import Figure

    points = list(dict.fromkeys(p for p, _ in curves))
    styles = method_styles(methods)
    figure = Figure(figsize=(6.5 * len(points), 4.8), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(points)))
    for ax, point in zip(axes, points):
        for (p, method), seeds in curves.items():
            if p != point:
                continue
            stats = cycle_stats(seeds)
            shares = [100 * s for s, _, _ in stats]
            means = np.array([100 * m for _, m, _ in stats])
            stds = np.array([100 * (s or 0.0) for _, _, s in stats])
            style = styles[method]
            ax.plot(shares, means, color=style.colour, marker=style.marker, label=f"{method} ({len(seeds)} seeds)")
            ax.fill_between(shares, means - stds, means + stds, color=style.colour, alpha=0.12, linewidth=0)
        ax.set_title(point or "accuracy against labelled share", fontsize=9)
        ax.set_xlabel("labelled share of the clients' data (%)")
        ax.set_ylabel("test accuracy at the cycle's end (%)")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right center", fontsize=8, frameon=False)
    return figure


def rounds_to_reach(accuracy: Sequence[float], target: float) -> int | None:
    """The first round (1-based) whose accuracy reaches ``target``; None if none does."""
    return next((index + 1 for index, value in enumerate(accuracy) if value >= target), None)


def rounds_table(experiment: Experiment, results: Mapping[Cell, CellResult], reference: str, at_round: int) -> str:
    """Table 1: per seed, the reference method's accuracy after ``at_round`` is the target; each method's rounds to
    reach it (mean over the seeds; "> R" when a seed never does within its R rounds)."""
    by_seed = {(c.method, c.seed): [r["accuracy"] for r in results[c].rounds] for c in results}
    lines = [
        f"Target: {reference}'s test accuracy after round {at_round} (per seed).",
        "",
        "| method | rounds to reach the target, per seed | mean |",
        "|---|---|---|",
    ]
    for method in experiment.methods:
        counts: list[str] = []
        reached: list[int] = []
        for seed in experiment.seeds:
            target = by_seed.get((reference, seed))
            curve = by_seed.get((method, seed))
            if not target or curve is None or len(target) < at_round:
                continue
            found = rounds_to_reach(curve, target[at_round - 1])
            counts.append(str(found) if found is not None else f"> {len(curve)}")
            if found is not None:
                reached.append(found)
        mean = f"{np.mean(reached):.1f}" if reached and len(reached) == len(counts) else "n/a"
        lines.append(f"| {method} | {', '.join(counts) or 'not run'} | {mean} |")
    return "\n".join(lines) + "\n"


def write_active_learning_tables(
    experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path
) -> list[Path]:
    """The table for the cells with cycles, and Table 1 when the file asks for it; the files written."""
    cycles = {cell: result.jsonl(CYCLES.file_name) for cell, result in results.items()}
    curves = cycle_curves(experiment, cycles)
    written: list[Path] = []
    if curves:
        paired = ""
        if experiment.compare:
            paired = (
                "\n## Paired differences at each cycle's end\n\n"
                "Method − baseline test accuracy on the same seed (same split, start and draws), percentage points; "
                "cycle 0 trains on the same initial labels for every query strategy.\n\n"
                + cycle_paired_table(curves, curve_seeds(experiment, cycles), experiment.compare)
            )
        (directory / TABLE_FILE).write_text(
            f"# {experiment.name}: test accuracy (%) at each cycle's end, by labelled share trained on\n\n"
            "Mean ± std over seeds; columns are cycles, headed by their mean labelled share.\n\n"
            + labelled_table(curves)
            + paired
        )
        written.append(directory / TABLE_FILE)
    target = experiment.rounds_to_reach
    if target is not None and results:
        (directory / ROUNDS_TABLE_FILE).write_text(
            f"# {experiment.name}: rounds to reach a reference accuracy\n\n"
            + rounds_table(experiment, results, target.method, target.round)
        )
        written.append(directory / ROUNDS_TABLE_FILE)
    return written


def write_active_learning_figure(
    experiment: Experiment, results: Mapping[Cell, CellResult], directory: Path
) -> list[Path]:
    """The figure for the cells with cycles (none without); the files written."""
    curves = cycle_curves(experiment, {cell: result.jsonl(CYCLES.file_name) for cell, result in results.items()})
    if not curves:
        return []
    labelled_figure(curves, list(experiment.methods)).savefig(directory / FIGURE_FILE, dpi=110)
    return [directory / FIGURE_FILE]
