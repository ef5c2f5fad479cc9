"""The staged copy of the app packs into the FAB Flower packs from the project itself."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pytest
import tomllib
from flwr.cli.build import build_fab_from_disk

from simulation.app_files import stage_app
from simulation.local_run import remove_run_home

ROOT = Path(__file__).resolve().parents[1]


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write each ``files`` entry (path relative to ``root`` -> text), creating the folders."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


#: The project's ``fab-exclude`` patterns that staging applies, each with a file it keeps out of the FAB (Flower refuses
#: a pattern that matches no file).
EXCLUDED = {
    "measurements/**": ("measurements/benchmarks/r.json", "{}"),
    "docs/**": ("docs/index.md", "# docs"),
    "tests/**": ("tests/learning.py", "z = 3\n"),
    "experiments/**": ("experiments/a.yaml", "a: 1"),
    "benchmarks/**": ("benchmarks/run.py", "b = 1\n"),
    "scripts/**": ("scripts/tool.py", "c = 1\n"),
    "deployment/**": ("deployment/credentials.py", "d = 1\n"),
    "/*.md": ("README.md", "# readme"),
    "/mkdocs.yml": ("mkdocs.yml", "site_name: x"),
}
#: A file for each of ``EXCLUDED``'s patterns: what the app's FAB leaves out.
LEFT_OUT = dict(EXCLUDED.values())


def fab_files(app: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(BytesIO(build_fab_from_disk(app))) as fab:
        return {name: fab.read(name) for name in fab.namelist() if name != ".info/CONTENT"}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Flower builds its path specs with a deprecated name
def test_the_staged_copy_packs_into_the_same_fab(tmp_path: Path) -> None:
    project = tmp_path / "project"
    files = {
        "pyproject.toml": (ROOT / "pyproject.toml").read_text(),
        ".gitignore": (ROOT / ".gitignore").read_text(),
        "server_app/app.py": "x = 1\n",
        "data/assets/set.json": "{}",
        "data/assets/LICENSE-set.md": "text",
        **LEFT_OUT,
        "results/run/summary.json": "{}",
        ".venv/lib/site.py": "y = 2\n",
        ".flwr-home/run-1/config.toml": "",
        "client_app/__pycache__/app.cpython-311.pyc": "",
        "notes.txt": "not packed",
    }
    write_tree(project, files)
    staged = stage_app(project, project / ".flwr-home" / "run-1" / "app")
    assert not (staged / ".venv").exists() and not (staged / "results").exists() and not (staged / "notes.txt").exists()
    assert not [name for name in LEFT_OUT if (staged / name).exists()]  # the project's fab-exclude: not copied
    from_stage, from_project = fab_files(staged), fab_files(project)
    assert from_stage.keys() == from_project.keys()
    packed = ["data/assets/LICENSE-set.md", "data/assets/set.json", "pyproject.toml", "server_app/app.py"]
    assert sorted(from_project) == packed
    assert {k: v for k, v in from_stage.items() if k != "pyproject.toml"} == {
        k: v for k, v in from_project.items() if k != "pyproject.toml"
    }
    staged_config, project_config = (
        tomllib.loads(fab["pyproject.toml"].decode()) for fab in (from_stage, from_project)
    )
    assert project_config["tool"]["flwr"]["app"].pop("fab-exclude") == [*EXCLUDED, ".gitignore"]
    assert staged_config["tool"]["flwr"]["app"].pop("fab-exclude") == [".gitignore"]  # the pattern staging applied
    assert staged_config == project_config
    assert "server_app/app.py" in fab_files(staged)


def test_a_runs_flower_home_is_removed_or_after_a_failure_keeps_only_its_log(tmp_path: Path) -> None:
    for keep_log in (False, True):
        home = tmp_path / f"run-{keep_log}"
        names = ("app/pyproject.toml", "apps/fedft-eds/pyproject.toml", "superlink.log", "config.toml")
        write_tree(home, dict.fromkeys(names, "x"))
        remove_run_home(home, keep_log=keep_log)
        left = sorted(path.name for path in home.iterdir()) if home.exists() else []
        assert left == (["config.toml", "superlink.log"] if keep_log else [])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_deployment_folders_in_the_project_stay_out_of_the_fab(tmp_path: Path) -> None:
    """docs/deployment.md followed inside the project once packed the SuperNodes' installed app copies and the exported
    partitions into the next run's FAB, over Flower's 10 MB cap: .gitignore keeps them out."""
    project = tmp_path / "project"
    files = {
        "pyproject.toml": (ROOT / "pyproject.toml").read_text(),
        ".gitignore": (ROOT / ".gitignore").read_text(),
        "server_app/app.py": "x = 1\n",
        "state/node/apps/fedft-eds/server_app/app.py": "copy = 1\n" * 200_000,
        "export/node-0/partition.json": "{}" * 200_000,
        "keys/ca.json": "{}",
        "results/run/summary.json": "{}",
        **LEFT_OUT,
    }
    write_tree(project, files)
    packed = fab_files(project)
    assert "server_app/app.py" in packed
    assert not [name for name in packed if name.split("/")[0] in ("state", "export", "keys", "results")]
    assert len(build_fab_from_disk(project)) < 100_000


#: What the app's FAB holds beside its pyproject.toml: the packages the ServerApp and the ClientApp import.
APP_PACKAGES = [
    "client_app",
    "data",
    "methods",
    "models",
    "profiling",
    "protocol",
    "run_config",
    "server_app",
    "simulation",
    "strategies",
]

#: Run in a fresh interpreter with the unpacked FAB as its working folder, the project's own folder (the editable
#: install's path) taken off ``sys.path``: import both components and then every module of the app's packages (the
#: ones a run imports only when it needs them too; ``__main__`` modules are entry points, not imported), read the
#: embedded data set, and print the project modules that were loaded from anywhere else.
IMPORT_FROM_FAB = """
import importlib, os, pkgutil, sys
fab, project, packages = os.getcwd(), sys.argv[1], sys.argv[2].split(",")
sys.path[:] = [fab] + [p for p in sys.path if p and os.path.realpath(p) != project]
import server_app.app, client_app.app
for package in packages:
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
import data.loading
assert len(data.loading.load_mini().train.labels) > 0
loaded = {n: getattr(m, "__file__", None) or "" for n, m in sys.modules.items() if n.split(".")[0] in packages}
print(sorted(n for n, f in loaded.items() if not os.path.realpath(f).startswith(fab + os.sep)))
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_fab_holds_the_app_packages_and_both_components_import_from_it_alone(tmp_path: Path) -> None:
    with zipfile.ZipFile(BytesIO(build_fab_from_disk(stage_app(ROOT, tmp_path / "app")))) as fab:
        fab.extractall(tmp_path / "fab")
    held = sorted(path.name for path in (tmp_path / "fab").iterdir() if path.name not in (".info", "pyproject.toml"))
    assert held == APP_PACKAGES
    script = [sys.executable, "-c", IMPORT_FROM_FAB, str(ROOT), ",".join(APP_PACKAGES)]
    imported = subprocess.run(script, cwd=tmp_path / "fab", capture_output=True, text=True, check=False, timeout=120)
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert imported.stdout.strip() == "[]"
