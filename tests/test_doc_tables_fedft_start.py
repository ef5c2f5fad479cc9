"""The two-step Table II block's own arithmetic: EDS − RDS over the first and last rounds, and learning efficiency
from median round seconds with the pretraining round counted as FedAvg rounds."""

from __future__ import annotations

import pytest

from experiments.doc_tables import fedft_start
from experiments.doc_tables.recorded import RecordedCell, RecordedExperiment


def _cell(method: str, seed: int, accuracy: list[float], seconds: list[float], best: float) -> RecordedCell:
    return RecordedCell(
        name=f"{method}__seed{seed}",
        method=method,
        point={"dirichlet-alpha": 0.1},
        seed=seed,
        machine="x",
        summary={"best_accuracy": best, "rounds": len(accuracy), "pretraining_round.epochs.0": 10.0},
        rounds={"accuracy": accuracy, "client_train_seconds": seconds},
        cycles=(),
    )


def test_the_first_and_last_rounds_are_compared_seed_by_seed() -> None:
    """The block's EDS − RDS over the first and the last ``EARLY`` rounds, on the seeds both ran."""
    ten = [0.1 * i for i in range(10)]
    eds = _cell("e", 0, [a + (0.02 if i < 5 else -0.01) for i, a in enumerate(ten)], [1.0] * 10, 0.9)
    rds = [_cell("r", 0, ten, [1.0] * 10, 0.9), _cell("r", 1, ten, [1.0] * 10, 0.9)]
    run = RecordedExperiment("f", 2, (0, 1), {}, ("e", "r"), {}, (), (eds, *rds))
    early, late = slice(0, fedft_start.EARLY), slice(-fedft_start.EARLY, None)
    assert run.paired_rounds("e", "r", early) == {0: pytest.approx(0.02)}
    assert run.paired_rounds("e", "r", late) == {0: pytest.approx(-0.01)}


def test_learning_efficiency_uses_median_rounds_and_counts_the_phase_for_both() -> None:
    """FedAvg rounds take 10 s (one loaded round 500 s is ignored by the median), FedFT-EDS rounds 1 s; the
    pretraining round ran 10 epochs = 2 FedAvg rounds of E = 5 = 20 s for both."""
    rounds = 4
    fedavg = _cell("fedavg", 0, [0.5] * rounds, [10.0, 10.0, 500.0, 10.0], 0.8)
    eds = _cell("fedft-eds", 0, [0.4] * rounds, [1.0] * rounds, 0.6)
    run = RecordedExperiment(
        folder="f",
        clients=2,
        seeds=(0,),
        grid={},
        methods=("fedavg", "fedft-eds"),
        compare={},
        missing=(),
        cells=(fedavg, eds),
    )
    cost_ratio, plain, with_phase = fedft_start._efficiency(run, "fedft-eds", "fedavg", 0.1)
    assert cost_ratio == pytest.approx(0.1)
    assert plain == pytest.approx((0.6 / 4) / (0.8 / 40))
    assert with_phase == pytest.approx((0.6 / (20 + 4)) / (0.8 / (20 + 40)))


def test_a_cells_client_seconds_are_the_median_over_its_seeds() -> None:
    """One seed that ran beside other work (1,636 s against 202 and 223) moves the column's figure to its middle seed,
    not to the mean's 687."""
    cells = tuple(
        RecordedCell(
            name=f"fedft-all__seed{seed}",
            method="fedft-all",
            point={"dirichlet-alpha": 0.1},
            seed=seed,
            machine="x",
            summary={"total_client_train_seconds": seconds},
            rounds={},
            cycles=(),
        )
        for seed, seconds in ((0, 1636.0), (4, 202.0), (6, 223.0))
    )
    run = RecordedExperiment(
        folder="f", clients=2, seeds=(0, 4, 6), grid={}, methods=("fedft-all",), compare={}, missing=(), cells=cells
    )
    assert fedft_start._client_seconds(run, "fedft-all", 0.1) == "223"


def test_a_claim_gets_a_verdict_only_from_three_seeds() -> None:
    assert fedft_start._verdict({0: 0.01, 1: 0.02}) == "none yet (2 of 3 seeds)"
    assert fedft_start._verdict({0: 0.01, 1: 0.02, 2: 0.03}) == "**reproduces**"
    assert fedft_start._verdict({0: -0.01, 1: 0.02, 2: -0.03}) == "**does not (level)**"


def test_the_machines_are_named_with_the_seeds_each_computed() -> None:
    """A start is reproducible only on one kind of CPU, so the block says which seeds ran where."""
    cells = [
        RecordedCell(f"m__seed{seed}", "m", {}, seed, machine, {}, {}, ())
        for seed, machine in ((4, "AVX512 box"), (0, "AVX2 box"), (1, "AVX2 box"), (4, "AVX512 box"))
    ]
    run = RecordedExperiment("f", 2, (0, 1, 4), {}, ("m",), {}, (), tuple(cells))
    assert fedft_start._machines(run) == "seeds 0, 1 on AVX2 box; seed 4 on AVX512 box"
    coded = [
        RecordedCell("m__seed0", "m", {}, 0, "AVX2 box", {}, {}, (), code="1a2b3c4"),
        RecordedCell("m__seed1", "m", {}, 1, "AVX2 box", {}, {}, ()),
        RecordedCell("m__seed4", "m", {}, 4, "AVX512 box", {}, {}, (), code="5d6e7f8 with uncommitted changes"),
    ]
    run = RecordedExperiment("f", 2, (0, 1, 4), {}, ("m",), {}, (), tuple(coded))
    assert fedft_start._machines(run) == (
        "seeds 0, 1 on AVX2 box, code of 1a2b3c4 (the cells that recorded it); "
        "seed 4 on AVX512 box, code of 5d6e7f8 with uncommitted changes"
    )


def test_the_mini_table_names_what_has_not_run_and_compares_only_pairs_that_ran(monkeypatch) -> None:
    """EDS and RDS ran at Dir(0.1) on one seed: their row is compared (no verdict from one seed), every other row
    and claim says it has not run."""

    def cell(method: str, best: float) -> RecordedCell:
        summary = {
            "best_accuracy": best,
            "mean_last10_accuracy": best - 0.05,
            "total_client_train_seconds": 10.0,
            "initial_accuracy": 0.3,
            "pretraining_round.pretrained_accuracy": 0.08,
            "pretraining_round.epochs.0": 4.0,
            "rounds": 20,
        }
        return RecordedCell(f"{method}__seed0", method, {"dirichlet-alpha": 0.1}, 0, "box", summary, {}, ())

    run = RecordedExperiment(
        "f", 10, (0, 1, 2), {}, ("fedft-eds", "fedft-rds"), {}, (), (cell("fedft-eds", 0.6), cell("fedft-rds", 0.58))
    )
    monkeypatch.setattr(fedft_start, "load", lambda folder: run)
    block = fedft_start.table2_mini_two_step()
    rows = {" | ".join(line.split(" | ")[:2]).lstrip("| "): line for line in block.splitlines() if line[:2] == "| "}
    assert "| FedFT-EDS > FedFT-RDS (10%) | 0.1 | +2.0: +2.0 | +2.0 | +2.71 | none yet (1 of 3 seeds) |" in block
    assert "(4 epochs; 30.0% at Dir(0.1) after it)" in block
    assert rows["FedAvg | 100"].count("not run yet") == 2 and rows["FedFT-EDS | 50"].count("not run yet") == 2
    assert rows["FedFT-EDS | 10"] == "| FedFT-EDS | 10 | 0 | **60.00** | **55.00** | not run yet |  |  | 10 / – |"
    assert "FedFT-EDS > FedFT-RDS (10%) at Dir(0.5)" in block.split("Not compared yet")[1]
    assert "pretraining pays: FedAvg > FedAvg without pretraining at Dir(0.1)" in block
    assert "seed 0 on box" in block


def test_the_mini_table_explains_its_rows_once_every_compared_method_ran_at_both_alphas(monkeypatch) -> None:
    """The learning-efficiency, early-and-late and gap-split bullets join the mini block when FedFT-EDS/RDS (10% and
    50%), FedFT-ALL and FedAvg have all run at Dir(0.1) and Dir(0.5), and not while one of them is missing."""
    methods = ("fedft-eds", "fedft-rds", "fedft-eds-50", "fedft-rds-50", "fedft-all", "fedavg")

    def cell(method: str, alpha: float) -> RecordedCell:
        best = 0.5 + 0.01 * methods.index(method)
        summary = {
            "best_accuracy": best,
            "mean_last10_accuracy": best - 0.05,
            "total_client_train_seconds": 10.0,
            "initial_accuracy": 0.3,
            "pretraining_round.pretrained_accuracy": 0.08,
            "pretraining_round.epochs.0": 4.0,
            "rounds": 20,
        }
        rounds = {"accuracy": [best] * 20, "client_train_seconds": [0.5] * 20}
        return RecordedCell(f"{method}__{alpha}", method, {"dirichlet-alpha": alpha}, 0, "box", summary, rounds, ())

    cells = tuple(cell(m, a) for m in methods for a in (0.1, 0.5))
    complete = RecordedExperiment("f", 10, (0, 1, 2), {}, methods, {}, (), cells)
    monkeypatch.setattr(fedft_start, "load", lambda folder: complete)
    block = " ".join(fedft_start.table2_mini_two_step().split())
    assert "**Learning efficiency**" in block and "**EDS − RDS over the rounds**" in block
    assert "(FedFT-RDS − FedFT-ALL) −3.0 and −3.0" in block
    assert block.endswith("does not beat random: no reason found in this setting.")

    without_fedavg_at_05 = tuple(c for c in cells if (c.method, c.point["dirichlet-alpha"]) != ("fedavg", 0.5))
    partial = RecordedExperiment("f", 10, (0, 1, 2), {}, methods, {}, (), without_fedavg_at_05)
    monkeypatch.setattr(fedft_start, "load", lambda folder: partial)
    assert "Learning efficiency" not in fedft_start.table2_mini_two_step()
