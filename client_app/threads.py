"""How many torch threads a ClientApp uses.

In Flower's simulation every ClientApp runs in a Ray actor that was given ``client-resources-num-cpus``
CPUs, but Ray does not limit torch's thread pool: two actors on two cores would each start two threads and
run at half speed. ``client-threads = 0`` therefore means "the CPUs Ray assigned to this actor" in
simulation and "all cores" on a real device.
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


def use_threads(setting: int) -> int:
    """Set torch's intra-op threads from ``client-threads`` and return the number used."""
    threads = setting or assigned_cpus() or os.cpu_count() or 1
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
