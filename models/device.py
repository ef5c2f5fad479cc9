"""Which torch device a node computes on: ``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` | ``mps``.

``auto`` takes a CUDA GPU (a GPU server, a Jetson) when torch sees one, else Apple's MPS, else the CPU. Naming an
accelerator the node does not have is an error that says what torch does see, never a silent fall-back to the
CPU: a run meant for a GPU that quietly trains on the CPU is slower by orders of magnitude and hard to notice.
The server (``server-device``) and the clients (``device``, or a SuperNode's node config ``device``) resolve
their own.

A CUDA device is made deterministic when resolved: cuDNN picks deterministic kernels (no benchmarking) and
torch's deterministic algorithms are requested (a warning, not an error, where an operation has none), so a run
on a GPU, like one on the CPU, computes the same models every time for its configuration.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import torch

_DEVICE_NAME = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DEVICE_NAMES_HELP = "`auto` (a CUDA GPU, else Apple MPS, else CPU), `cpu`, `cuda`, `cuda:N` or `mps`"


class DeviceUnavailableError(ValueError):
    """The configured device does not exist on this node."""


def is_device_name(name: str) -> bool:
    """Whether ``name`` is one of the accepted spellings (not whether this node has it)."""
    return bool(_DEVICE_NAME.match(name))


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()


def available_devices() -> list[torch.device]:
    """Every device torch can compute on here: the CPU, each CUDA GPU, MPS."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices += [torch.device("cuda", index) for index in range(torch.cuda.device_count())]
    if _mps_available():
        devices.append(torch.device("mps"))
    return devices


def describe_available() -> str:
    """What torch sees on this node, e.g. ``cpu, cuda:0 (NVIDIA H100 80GB HBM3)``."""
    names = []
    for device in available_devices():
        label = str(device)
        if device.type == "cuda":
            label += f" ({torch.cuda.get_device_name(device)})"
        names.append(label)
    build = f"torch {torch.__version__}" + (
        f", CUDA {torch.version.cuda}" if torch.version.cuda else ", no CUDA support"
    )
    return f"{', '.join(names)} ({build})"


def cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU's model as the OS names it (``cpuinfo``: the text of Linux's /proc/cpuinfo, read when not given),
    with its family and model numbers where Linux gives them: a hypervisor may name a whole vendor line, e.g.
    ``AMD EPYC``, whose generations differ in the kernels torch picks."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or platform.machine()
    first = cpuinfo.split("\n\n")[0]
    pairs = (line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in pairs}
    name = fields.get("model name") or fields.get("Model") or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def compute_description(device: torch.device) -> dict[str, str | int]:
    """What computed a result on ``device``: the processor, torch's build, the CPU kernels torch picked and its
    thread count. Floating-point results (and so trained models) are the same from run to run on one such setup,
    but differ between CPU generations or thread counts: a pretraining of 30 epochs amplifies the difference into
    a point or two of accuracy. Recorded beside results so that a figure can be traced to what produced it."""
    description: dict[str, str | int] = {
        "device": str(device),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        description["gpu"] = torch.cuda.get_device_name(device)
    return description


def describe_machine(description: dict[str, str | int]) -> str:
    """``compute_description``'s record in a few words, e.g. ``AMD EPYC (family 26, model 2), torch 2.13.0+cpu,
    CPU kernels AVX512, 2 threads`` (a GPU first, where there is one)."""
    gpu = f"{description['gpu']} with " if description.get("gpu") else ""
    threads = description["threads"]
    return (
        f"{gpu}{description['cpu']}, torch {description['torch']}, CPU kernels {description['cpu_capability']}, "
        f"{threads} thread{'' if threads == 1 else 's'}"
    )


def resolve_device(name: str, key: str = "'device'") -> torch.device:
    """The torch device for ``name``; DeviceUnavailableError naming ``key`` (e.g. ``run config 'device'``) when it
    is not on this node."""
    if not is_device_name(name):
        raise DeviceUnavailableError(f"{key} = {name!r} is not a device name: use {DEVICE_NAMES_HELP}")
    if name == "auto":
        name = str(available_devices()[1]) if len(available_devices()) > 1 else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    if device not in available_devices():
        raise DeviceUnavailableError(
            f"{key} = {name!r} but this node has no such device; torch sees: {describe_available()}"
        )
    if device.type == "cuda":
        make_cuda_deterministic()
    return device


def make_cuda_deterministic() -> None:
    """Deterministic CUDA kernels for this process: cuDNN without benchmarking, cuBLAS with a fixed workspace
    (``CUBLAS_WORKSPACE_CONFIG``, read when cuBLAS starts; a value the user set is kept), and torch's
    deterministic algorithms, warning where an operation has no deterministic version."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a timer around it measures the work and not its queueing."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
