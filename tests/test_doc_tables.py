"""The docs' generated blocks: README.md and docs/results.md hold exactly what the recorded summaries give, and the
summary.json they are drawn from holds what each cell recorded."""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path

import pytest

from experiments.cell_results import CellResult
from experiments.doc_tables import recorded
from experiments.doc_tables.blocks import BlockError, prose, rewrite
from experiments.doc_tables.markdown import level_verdict, verdict
from experiments.doc_tables.pages import PAGES, regenerated
from experiments.doc_tables.recorded import RecordError, paired_text, per_seed, span
from experiments.spec import parse_experiment
from experiments.summary import write_summary_json


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_page_is_what_its_summaries_give(page: str) -> None:
    now, generated = regenerated(page)
    difference = "".join(difflib.unified_diff(now.splitlines(True), generated.splitlines(True), page, "generated"))
    assert now == generated, f"{page} differs from its summaries (python -m experiments docs):\n{difference}"


def test_a_block_is_replaced_and_the_text_around_it_kept() -> None:
    text = "before\n<!-- a:start -->\nold 1.0\n<!-- a:end -->\nafter 2.0\n"
    assert rewrite(text, {"a": lambda: "new 3.0"}) == "before\n<!-- a:start -->\nnew 3.0\n<!-- a:end -->\nafter 2.0\n"


def test_the_quick_references_markers_are_left_as_they_are() -> None:
    """tests/test_quick_reference.py reads the rows between them; they are not a generated block."""
    text = (
        "<!-- quick-reference:start -->\n| row 1.0 |\n<!-- quick-reference:end -->\n"
        "<!-- a:start -->\nold\n<!-- a:end -->\n"
    )
    assert rewrite(text, {"a": lambda: "new"}) == text.replace("old", "new")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- b:start -->\n<!-- b:end -->", "no generated block is called 'b'"),
        ("<!-- a:start -->\nx", "block 'a' has no end marker"),
        ("<!-- a:start -->\n<!-- a:start -->", "starts inside block 'a'"),
        ("<!-- a:start --><!-- a:end --><!-- a:start --><!-- a:end -->", "appears twice"),
        ("no markers", "holds no marker of block(s) a"),
    ],
)
def test_markers_that_do_not_pair_up_are_refused(text: str, message: str) -> None:
    with pytest.raises(BlockError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rewrite(text, {"a": lambda: "x"})


def test_prose_wraps_at_120_columns_without_breaking_a_word() -> None:
    text = prose("word " * 40, "[a link](https://example.org/" + "x" * 130 + ")")
    assert all(len(line) <= 120 or " " not in line for line in text.splitlines())
    assert text.replace("\n", " ").split() == ("word " * 40 + "[a link](https://example.org/" + "x" * 130 + ")").split()


def test_figures_read_as_the_docs_write_them() -> None:
    assert paired_text({0: -0.162, 1: -0.097, 2: -0.067}) == "−10.9 ± 4.9 (0/3)"
    assert paired_text([0.013]) == "+1.3"
    assert per_seed({2: 0.01, 0: -0.025}) == "−2.5, +1.0"
    assert span([0.099, 0.144, 0.126]) == "9.9–14.4" and span([0.5, 0.5]) == "50.0"


def _experiment(tmp_path: Path):
    raw = {
        "name": "made-up",
        "description": "d",
        "cost": "c",
        "methods": ["fedavg", "fedft-eds"],
        "grid": {"dirichlet-alpha": [0.1]},
        "seeds": [0, 1],
        "compare": {"fedft-eds": "fedavg"},
    }
    return parse_experiment(raw, tmp_path / "made-up.yaml")


def _result(best: float, accuracy: list[float], composed: float | None = None) -> CellResult:
    rounds = [{"round": i + 1, "accuracy": a, "client_stats": [{"big": 1}]} for i, a in enumerate(accuracy)]
    if composed is not None:
        rounds[-1]["composed_accuracy"] = composed
    summary = {
        "method": "fedavg",
        "initial_accuracy": 0.1,
        "best_accuracy": best,
        "rounds": len(accuracy),
        "best_client_accuracy_mean": None,
        "machine": {"device": "cpu", "cpu": "x86", "torch": "2", "cpu_capability": "AVX2", "threads": 1},
        "pretraining": {"validation_accuracy": 0.9, "machine": {"cpu": "x86"}},
        "warnings": ["w"],
    }
    return CellResult(summary, rounds, {})


def test_summary_json_holds_each_cell_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    experiment = _experiment(tmp_path)
    fedavg0, fedavg1, eds0, _ = experiment.cells
    results = {
        fedavg0: _result(0.6, [0.5, 0.6]),
        fedavg1: _result(0.7, [0.7, 0.65]),
        eds0: _result(0.65, [0.6, 0.65], composed=0.8),
    }
    folder = tmp_path / "made-up"
    folder.mkdir()
    path = write_summary_json(experiment, results, folder, {eds0: [{"cycle": 0, "accuracy": 0.5, "extra": 1}]})
    record = json.loads(path.read_text())
    assert record["missing"] == ["fedft-eds__dirichlet-alpha=0.1__seed1"]
    assert record["compare"] == {"fedft-eds": "fedavg"}
    eds = record["cells"][2]
    assert eds["summary"]["pretraining.validation_accuracy"] == 0.9 and "warnings" not in eds["summary"]
    assert eds["rounds"] == {"round": [1, 2], "accuracy": [0.6, 0.65], "composed_accuracy": [None, 0.8]}
    assert eds["cycles"] == [{"cycle": 0, "accuracy": 0.5}]
    assert eds["machine"] == "x86, torch 2, CPU kernels AVX2, 1 thread"

    monkeypatch.setattr(recorded, "RECORDED", tmp_path)
    recorded.load.cache_clear()
    run = recorded.load("made-up")
    recorded.load.cache_clear()
    assert run.values("fedavg", "best_accuracy", {"dirichlet-alpha": 0.1}) == {0: 0.6, 1: 0.7}
    assert run.paired("fedft-eds", "fedavg", "best_accuracy") == {0: pytest.approx(0.05)}
    assert run.paired_rounds("fedft-eds", "fedavg", slice(0, 1)) == {0: pytest.approx(0.1)}  # round 1: 0.6 − 0.5
    assert run.paired_rounds("fedft-eds", "fedavg", slice(-1, None)) == {0: pytest.approx(0.05)}  # the last round
    assert math.isnan(run.one("fedft-eds", "best_client_accuracy_mean"))
    with pytest.raises(RecordError, match="no finished cell of 'fedprox'"):
        run.values("fedprox", "best_accuracy")
    with pytest.raises(RecordError, match="recorded no 'final_accuracy'"):
        run.values("fedavg", "final_accuracy")


def test_a_round_before_round_1_is_not_a_federated_round() -> None:
    cell = recorded.RecordedCell(
        name="c",
        method="m",
        point={},
        seed=0,
        machine="x",
        summary={},
        rounds={"round": [0, 1, 2], "accuracy": [0.55, 0.6, 0.7]},
        cycles=(),
    )
    assert cell.series("accuracy") == [0.6, 0.7]


@pytest.mark.parametrize(
    ("differences", "direction", "expected"),
    [
        ([0.02, 0.01, 0.03], 1, "reproduces"),
        ([0.08, 0.07, -0.005], 1, "partly"),
        ([0.02, 0.01, -0.05], 1, "does not (level)"),
        ([0.06, 0.01, -0.06], 1, "partly (level)"),
        ([0.02, -0.01, -0.015], 1, "does not (level)"),
        ([-0.05, -0.06, -0.04], 1, "does not"),
        ([-0.05, -0.06, -0.04], -1, "reproduces"),
    ],
)
def test_the_verdict_follows_the_seeds(differences: list[float], direction: int, expected: str) -> None:
    assert verdict(dict(enumerate(differences)), direction) == expected


def test_a_level_claim_holds_within_one_standard_deviation() -> None:
    assert level_verdict({0: 0.018, 1: -0.009, 2: -0.022}) == "reproduces (level)"
    assert level_verdict({0: 0.05, 1: 0.06, 2: 0.04}) == "does not"


def test_a_pair_whose_runs_started_apart_is_refused_to_the_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summary.json names the seeds the report left out of a pair (its runs started from different models), and the
    docs' tables refuse to pair them; a file without such seeds has no such field (older records read the same)."""
    experiment = _experiment(tmp_path)
    fedavg0, _, eds0, _ = experiment.cells
    results = {fedavg0: _result(0.6, [0.5, 0.6]), eds0: _result(0.65, [0.6, 0.65])}
    folder = tmp_path / "made-up"
    folder.mkdir()
    assert "started_apart" not in json.loads(write_summary_json(experiment, results, folder).read_text())
    apart = [{"method": "fedft-eds", "baseline": "fedavg", "point": {"dirichlet-alpha": 0.1}, "seed": 0}]
    record = json.loads(write_summary_json(experiment, results, folder, started_apart=apart).read_text())
    assert record["started_apart"] == apart

    monkeypatch.setattr(recorded, "RECORDED", tmp_path)
    recorded.load.cache_clear()
    run = recorded.load("made-up")
    recorded.load.cache_clear()
    with pytest.raises(RecordError, match="'fedavg' and 'fedft-eds' started from different models on seed 0"):
        run.paired("fedavg", "fedft-eds", "best_accuracy")
    with pytest.raises(RecordError, match="'fedft-eds' and 'fedavg' started from different models on seed 0"):
        run.paired_rounds("fedft-eds", "fedavg", slice(0, 1))
