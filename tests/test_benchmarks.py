"""The benchmark suite (``python -m benchmarks``): the list, each benchmark's ``--help``, the recorded figures of
docs/benchmarks.md regenerated from the recorded files, and what no benchmark may do (import the tests, patch another
module)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as suite
from benchmarks import json_lines

PROJECT = Path(__file__).resolve().parents[1]
BENCHMARKS_DIR = PROJECT / "benchmarks"
#: Modules of benchmarks/ that are not a benchmark: the package, the dispatcher, the measuring harness, the job pfl
#: runs in its own environment, the cgroups that cap or slow what runs in them, and the competing load.
NOT_BENCHMARKS = {"__init__", "__main__", "measured_run", "pfl_job", "cgroup", "cpu_share"}


def test_python_m_benchmarks_lists_every_benchmark() -> None:
    for args in ([], ["--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks", *args], cwd=PROJECT, capture_output=True, text=True, check=True
        )
        listed = [line.split()[0] for line in done.stdout.split("benchmarks:\n", 1)[1].splitlines()]
        assert listed == list(suite.BENCHMARKS)
        assert "python -m benchmarks NAME --help" in done.stdout


def test_every_module_is_a_listed_benchmark_or_a_named_helper_and_the_suite_stays_small() -> None:
    modules = {path.stem for path in BENCHMARKS_DIR.glob("*.py")}
    listed = {module.rsplit(".", 1)[1] for module, _ in suite.BENCHMARKS.values()}
    assert modules == listed | NOT_BENCHMARKS
    assert len(suite.BENCHMARKS) <= 10  # a maintained suite of about ten; a study is an experiment file


@pytest.mark.parametrize("name", list(suite.BENCHMARKS))
def test_each_benchmark_has_a_help_that_names_its_command(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        suite.main([name, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m benchmarks {name} ")
    assert f"    python -m benchmarks {name}" in out.split("\n\n", 1)[1]  # the docstring's own usage line


def test_a_benchmark_runs_through_the_dispatcher_in_a_fresh_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "edge-client", "--help"], cwd=PROJECT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m benchmarks edge-client ")


def test_an_unknown_benchmark_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert suite.main(["cost-model"]) == 2
    err = capsys.readouterr().err
    assert "no benchmark 'cost-model'" in err and "default-run" in err


def test_docs_figures_are_the_recorded_files_figures() -> None:
    """Every block of docs/benchmarks.md is what ``python -m benchmarks docs`` writes from the recorded files."""
    page = suite.DOCS_PAGE.read_text()
    blocks = suite.RECORDED_BLOCK.findall(page)
    assert sorted(name for _, name, _, _ in blocks) == sorted(suite.BENCHMARKS)  # one block per benchmark
    assert suite.render(page) == page, "docs/benchmarks.md is stale: run python -m benchmarks docs"


def test_a_figure_typed_into_the_page_is_replaced_and_an_unknown_block_refused() -> None:
    page = "intro\n<!-- recorded: scale -->\n\n| typed | 1.00 |\n\n<!-- /recorded -->\nafter\n"
    assert suite.render(page, lambda name: f"{name} from its file") == (
        "intro\n<!-- recorded: scale -->\n\nscale from its file\n\n<!-- /recorded -->\nafter\n"
    )
    with pytest.raises(ValueError, match="no benchmark 'cost-model'"):
        suite.render("<!-- recorded: cost-model -->\n<!-- /recorded -->", lambda name: "")


def _imported_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def _offences(source: str) -> list[str]:
    """What a benchmark may not do: import the tests, assign to an attribute of something it imported (a module, a
    class: patching another module), or call ``setattr``."""
    tree = ast.parse(source)
    imported = _imported_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tests" for a in node.names):
            found.append(f"line {node.lineno}: imports tests")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests":
            found.append(f"line {node.lineno}: imports tests")
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id in imported:
                    found.append(f"line {node.lineno}: assigns {part.value.id}.{part.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            found.append(f"line {node.lineno}: calls setattr")
    return found


@pytest.mark.parametrize("path", sorted(BENCHMARKS_DIR.glob("*.py")), ids=lambda path: path.name)
def test_no_benchmark_imports_the_tests_or_patches_another_module(path: Path) -> None:
    assert _offences(path.read_text()) == []


def test_the_check_finds_an_import_of_the_tests_and_a_patch() -> None:
    source = (
        "import client_app.local_update as lu\nfrom tests.in_process import run_in_process\n"
        "from client_app import data_selection\nlu.select_samples = print\ndata_selection.RULES['x'] = 1\n"
        "setattr(lu, 'a', 1)\nclass Own:\n    pass\nown = Own()\nown.value = 1\n"
    )
    assert _offences(source) == [
        "line 2: imports tests",
        "line 4: assigns lu.select_samples",
        "line 5: assigns data_selection.RULES",
        "line 6: calls setattr",
    ]


def test_recorded_results_are_written_a_list_item_a_line_and_read_back_the_same() -> None:
    result = {"date": "d", "job": {"a": 1, "b": [1, 2]}, "runs": [{"x": 1}, {"x": [2, 3]}], "none": []}
    text = json_lines(result)
    assert json.loads(text) == result
    assert text.splitlines() == [
        "{", '"date": "d",', '"job": {"a": 1, "b": [1, 2]},', '"runs": [', '{"x": 1},', '{"x": [2, 3]}', "],",
        '"none": []', "}",
    ]  # fmt: skip
