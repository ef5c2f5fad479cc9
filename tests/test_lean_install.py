"""The lean SuperNode install: ``pip install .`` brings what a ClientApp needs on a device and nothing of the
simulation, experiment or plotting stack, and the ClientApp trains without those packages."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from packaging.utils import canonicalize_name
from packaging.version import Version

from simulation.local_run import PROJECT_DIR
from tests.test_dependency_lock import locked_versions

#: Packages only simulation, experiments or development need; a device must not have to install or import them.
NOT_ON_A_NODE = ("ray", "pandas", "pyarrow", "datasets", "flwr-datasets", "matplotlib", "scipy", "scikit-learn")


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def test_the_dependencies_are_lean_and_torch_is_a_range() -> None:
    project = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["project"]
    names = {
        _canonical(d.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip())
        for d in project["dependencies"]
    }
    assert names == {"flwr", "torch", "numpy", "pyyaml"}
    torch_requirement = next(d for d in project["dependencies"] if d.startswith("torch"))
    assert "==" not in torch_requirement and ">=" in torch_requirement  # CUDA, ROCm and Jetson builds must fit
    flwr_requirement = next(d for d in project["dependencies"] if d.startswith("flwr"))
    assert "[" not in flwr_requirement  # no simulation extra
    assert set(project["optional-dependencies"]) >= {"simulation", "experiments", "dev"}


def test_pip_resolves_the_plain_install_without_the_simulation_stack(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--report",
        str(report),
        "-c",
        str(PROJECT_DIR / "constraints-lock.txt"),
        str(PROJECT_DIR),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    if done.returncode and any(s in done.stderr for s in ("ConnectionError", "NewConnectionError", "Max retries")):
        pytest.skip(f"the package registry is unreachable: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    versions = {
        canonicalize_name(item["metadata"]["name"]): Version(item["metadata"]["version"])
        for item in json.loads(report.read_text())["install"]
    }
    resolved = set(versions)
    assert {"flwr", "torch", "numpy", "pyyaml", "fedft-eds"} <= resolved
    assert not resolved & set(NOT_ON_A_NODE), sorted(resolved & set(NOT_ON_A_NODE))
    # the lock holds every package of the lean install (torch==2.13.0 is the resolved 2.13.0+cpu)
    locked = locked_versions((PROJECT_DIR / "constraints-lock.txt").read_text())
    off_lock = {
        name: str(v) for name, v in versions.items() if name != "fedft-eds" and locked.get(name) != Version(v.public)
    }
    assert not off_lock, off_lock


#: Their import names.
BLOCKED_MODULES = ("ray", "pandas", "pyarrow", "datasets", "flwr_datasets", "matplotlib", "scipy", "sklearn")


def site_packages_without(blocked: tuple[str, ...], into: Path) -> Path:
    """A folder that mirrors this environment's site-packages (by symlinks) minus the ``blocked`` packages, as if
    they had never been installed."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    into.mkdir()
    for entry in site.iterdir():
        top = entry.name.split("-")[0].split(".")[0].lower()
        if top in blocked or entry.suffix == ".pth":
            continue
        (into / entry.name).symlink_to(entry)
    return into


def test_a_client_trains_from_its_data_folder_without_the_simulation_packages(tmp_path: Path) -> None:
    """A Python that has no Ray, HF datasets, flwr-datasets, pandas, pyarrow, matplotlib, scipy or scikit-learn
    runs the ClientApp's label-count query and a training round from an exported ``data-path`` folder."""
    from data.node_data import export_partitions
    from run_config import federated_split
    from tests.conftest import make_config

    config = make_config(dataset="synthetic", model="lenet5", method="fedft-eds")
    folder = export_partitions(federated_split(config), 2, tmp_path / "data")[0]
    lean_site = site_packages_without(BLOCKED_MODULES, tmp_path / "site-packages")
    script = textwrap.dedent(f"""
        import importlib.util, sys
        BLOCKED = {BLOCKED_MODULES!r}
        assert not any(importlib.util.find_spec(name) for name in BLOCKED), "a blocked package is importable"

        import client_app.app as client
        from client_app.node import Node
        from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
        from flwr.supercore.task_identity import TaskIdentity
        from methods.registry import CATALOGUE, OBJECTIVES
        from run_config import build_model_for
        from run_config.defaults import load_defaults
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1

        run_config = {{**load_defaults(), "dataset": "synthetic", "model": "lenet5", "local-epochs": 1,
                       "pretrain": "none", "client-threads": 1, "feature-cache-dir": ""}}
        context = Context(run_id=1, node_id=7, node_config={{"partition-id": 0, "num-partitions": 2,
                          "data-path": {str(folder)!r}}}, state=RecordDict(), run_config=run_config)
        query = Message(RecordDict({{"config": ConfigRecord({{}})}}), dst_node_id=7, message_type="query.label_counts")
        counts = client.label_counts(query, context).content["label-counts"]["counts"]
        model = build_model_for(Node(context, CATALOGUE, OBJECTIVES).config, seed=0)
        state = model.state_dict()
        upper = set(model.upper_state_keys("mid"))
        content = RecordDict({{"arrays": ArrayRecord({{k: v for k, v in state.items() if k in upper}}),
                               "frozen": ArrayRecord({{k: v for k, v in state.items() if k not in upper}}),
                               "config": ConfigRecord({{"server-round": 1, "learning-rate": 0.1}})}})
        reply = client.train(Message(content, dst_node_id=7, message_type="train"), context)
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
        print(sum(counts), reply.content["metrics"]["num-examples"], loaded)
    """)
    environment = {"PYTHONPATH": f"{PROJECT_DIR}:{lean_site}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        cwd=PROJECT_DIR,
        timeout=300,
        env=environment,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    total, trained, loaded = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert float(total) > 0 and int(trained) > 0 and loaded == "[]"
