"""Opt-in: the SuperNode installed by ``deployment/arm64_emulated_node.sh install`` in an emulated arm64 Debian
root filesystem (qemu-user via binfmt_misc, chroot) runs the lean install's imports as aarch64.

Skipped unless ``FEDFT_ARM64_ROOTFS`` names such a root filesystem (building it takes ~10 minutes and the
install another ~10 under emulation; needs root for chroot). docs/edge-arm64.md has the full deployed run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOTFS = os.environ.get("FEDFT_ARM64_ROOTFS", "")
VENV = "/opt/fedft/venv"

pytestmark = pytest.mark.skipif(
    not ROOTFS or not Path(ROOTFS, VENV.lstrip("/"), "bin", "python").exists(),
    reason="FEDFT_ARM64_ROOTFS does not point at a rootfs built by deployment/arm64_emulated_node.sh",
)


def in_rootfs(code: str) -> str:
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    result = subprocess.run(
        [chroot, ROOTFS, f"{VENV}/bin/python", "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_lean_install_is_aarch64_cpu_torch_and_flower() -> None:
    out = in_rootfs(
        "import platform, torch, flwr, numpy, yaml; from importlib.metadata import version;"
        "print(platform.machine(), version('flwr'), torch.cuda.is_available(), torch.__version__)"
    )
    machine, flwr_version, cuda, torch_version = out.split()
    assert machine == "aarch64" and flwr_version == "1.41.0" and cuda == "False"
    assert (2, 2) <= tuple(int(x) for x in torch_version.split("+")[0].split(".")[:2]) < (3, 0)


def test_lean_install_has_no_simulation_or_cuda_packages() -> None:
    out = in_rootfs(
        "from importlib.metadata import distributions;"
        "print(' '.join(sorted(d.metadata['Name'].lower() for d in distributions())))"
    )
    names = out.split()
    assert "fedft-eds" in names
    for absent in ("ray", "datasets", "flwr-datasets", "matplotlib"):
        assert absent not in names
    assert not [n for n in names if n.startswith(("nvidia-", "cuda-"))], names


def test_client_model_trains_a_step_on_aarch64() -> None:
    out = in_rootfs(
        "import torch; from models.registry import build_model;"
        "m = build_model('lenet5', 1, 10); x = torch.randn(4, 1, 32, 32);"
        "loss = m(x).logsumexp(1).mean(); loss.backward(); print(loss.item() == loss.item())"
    )
    assert out.endswith("True")
