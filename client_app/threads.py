"""How many torch threads a ClientApp uses.

In Flower's simulation every ClientApp runs in a Ray actor that was given ``client-resources-num-cpus``
CPUs, but Ray does not limit torch's thread pool: two actors on two cores would each start two threads and
run at half speed. ``client-threads = 0`` therefore means "the CPUs Ray assigned to this actor" in
simulation; elsewhere (a real device, or the experiments' in-process runner, where every ClientApp runs in the
server's process) it means ``OMP_NUM_THREADS`` when the user set it, and all cores otherwise. Ignoring an explicit
``OMP_NUM_THREADS=1`` made in-process cells 11x slower on the shared 2-core machine: torch's two OpenMP threads
spin-wait for each other while other processes hold the cores.
"""

from __future__ import annotations

import os
import sys

import torch


def assigned_cpus() -> int | None:
    """CPUs Ray assigned to this process's actor, or None outside a Ray worker."""
    ray = sys.modules.get("ray")  # imported only inside the simulation engine's workers
    if ray is None or not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return max(1, int(cpus)) if cpus else None


def omp_threads() -> int | None:
    """The thread count the user set in ``OMP_NUM_THREADS`` (its first entry), or None when unset or unreadable."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def threads_for(setting: int) -> int:
    """The torch threads ``client-threads = setting`` stands for here: the setting itself when positive, otherwise
    Ray's CPUs for this actor, ``OMP_NUM_THREADS``, or every core, in that order."""
    return setting or assigned_cpus() or omp_threads() or os.cpu_count() or 1


def use_threads(setting: int) -> int:
    """Set torch's intra-op threads from ``client-threads`` and return the number used."""
    threads = threads_for(setting)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
