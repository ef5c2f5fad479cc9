"""The commands of docs/configuration.md's "Your own data" and "Your own model" work as written: with the files they
name made (a generated image folder and saved Hugging Face dataset at the paths they name, the user's module from the
page), each ``make run`` passes the launcher's checks and runs in one process, shortened to one round of one epoch
(and one pretraining epoch); the other commands run as they are."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from data import own_data
from deployment.export_partitions import main as export_partitions
from run_config.defaults import load_defaults
from run_config.text import parse_overrides
from simulation.__main__ import check
from simulation.local_run import PROJECT_DIR
from tests.in_process import run_in_process
from tests.own_data_files import write_hf_dataset, write_image_folder
from tests.test_quick_reference import make_run_arguments

#: What the test changes of a documented run: where it writes, and its length.
SHORT = {"num-server-rounds": 1, "local-epochs": 1, "pretrain-epochs": 1, "pretrain-round": False}


def section(name: str) -> str:
    text = (PROJECT_DIR / "docs" / "configuration.md").read_text()
    return text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def fenced(text: str, language: str) -> list[str]:
    """The contents of the ``language`` code blocks in ``text``."""
    return [block.split("```", 1)[0] for block in text.split(f"```{language}\n")[1:]]


def in_folder(text: str, tmp_path: Path) -> str:
    """``text`` with the page's example folder, /data, replaced by one of the test's (quoted or not)."""
    return text.replace("/data/", f"{tmp_path}/")


def run_documented(commands: list[str], tmp_path: Path) -> list[str]:
    """Run each command; returns the results folders of its runs."""
    runs = []
    for index, command in enumerate(commands):
        if command.startswith("make run"):
            arguments = make_run_arguments(command)
            check(arguments)
            config = {**load_defaults(), **parse_overrides(arguments.run_config), **SHORT}
            config.update(
                {
                    "results-dir": str(tmp_path / "results"),
                    "run-name": f"command-{index}",
                    "node-wait-seconds": 0.0,
                    "pretrain-cache-dir": str(tmp_path / "pretrained"),
                    "feature-cache-dir": str(tmp_path / "features"),
                    "data-cache-dir": str(tmp_path / "arrays"),
                    "client-threads": 1,
                }
            )
            run_in_process(config, arguments.num_supernodes)
            runs.append(f"command-{index}")
        elif command.startswith("python -m deployment.export_partitions"):
            assert export_partitions(shlex.split(command)[3:]) == 0
        elif command.startswith("python -c"):
            exec(shlex.split(command)[2], {})
        else:
            raise AssertionError(f"a command the test does not know how to run: {command}")
    return runs


def completed(tmp_path: Path, run: str) -> bool:
    return json.loads((tmp_path / "results" / run / "summary.json").read_text())["status"] == "completed"


@pytest.fixture(autouse=True)
def _forget_own_data():
    yield
    own_data.own_dataset.cache_clear()
    own_data._KNOWN.clear()


def test_the_own_data_commands_run(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "flowers", count=400)
    write_hf_dataset(tmp_path / "flowers-hf", count=400, columns=("img", "label"))
    (commands,) = fenced(in_folder(section("own-data"), tmp_path), "bash")
    runs = run_documented(commands.strip().splitlines(), tmp_path)
    assert len(runs) == 2 and all(completed(tmp_path, run) for run in runs)
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == [f"node-{i}" for i in range(4)]


def test_the_own_model_commands_run(tmp_path: Path, monkeypatch) -> None:
    text = in_folder(section("own-model"), tmp_path)
    (module,) = fenced(text, "python")
    (tmp_path / "my_models.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    write_image_folder(tmp_path / "flowers", count=400)
    (commands,) = fenced(text, "bash")
    runs = run_documented(commands.strip().splitlines(), tmp_path)
    assert len(runs) == 2 and all(completed(tmp_path, run) for run in runs)
    summary = json.loads((tmp_path / "results" / runs[0] / "summary.json").read_text())
    assert summary["pretraining"]["checkpoint"] == str(tmp_path / "backbone.pt")
    assert summary["pretraining"]["checkpoint_classes"] == 1000
