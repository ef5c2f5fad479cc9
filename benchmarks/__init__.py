"""Benchmarks: commands that measure the app and write what they measured to measurements/benchmarks/.

``python -m benchmarks`` lists them (``benchmarks/__main__.py``); each module has ``main(argv)``, its command, and
``recorded_figure()``, its last recorded figure as Markdown, read from the files it wrote (docs/benchmarks.md shows it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import threading
import uuid
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
#: Where every benchmark writes its results (outside the code packages).
RESULTS_DIR = PROJECT_DIR / "measurements" / "benchmarks"


def command_line(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m benchmarks NAME``; its ``--help`` shows the benchmark's docstring ``doc``."""
    return argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def commit_of(checkout: Path = PROJECT_DIR) -> str:
    """The short commit ``checkout`` has checked out; ``unknown`` outside a git checkout."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


class LoadWatch:
    """The highest 1-minute load average seen while it runs (a background thread sampling every few seconds)."""

    def __init__(self, every_seconds: float = 5.0) -> None:
        self.at_start = self.highest = os.getloadavg()[0]
        self._every = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self._every):
            self.highest = max(self.highest, os.getloadavg()[0])

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class CpuCgroup:
    """A cgroup of the CPU controller, made inside this process's own (cgroup v1's ``cpu`` controller, else v2's;
    Linux, root; OSError elsewhere), whose processes share at most ``share`` CPUs (``share=0.1``: 10 ms of CPU per
    100 ms, a CFS quota) or, with ``share=None``, as much as the machine has: its processes then compete with each
    other by their nice values alone (the kernel's autogroups, which would weigh each session as one, apply only
    outside a cgroup). ``enter`` moves the calling process into it: pass it as ``preexec_fn``, so that a command and
    everything it starts are in it (a SuperNode and its ClientApps; ``make test`` and its workers). ``close`` moves
    what is left to the parent and removes the cgroup."""

    PERIOD_US = 100_000

    def __init__(self, share: float | None) -> None:
        root = Path("/sys/fs/cgroup")
        own = Path("/proc/self/cgroup").read_text().splitlines()
        quota = None if share is None else max(1000, int(share * self.PERIOD_US))
        if (root / "cpu" / "cpu.cfs_quota_us").is_file():  # cgroup v1
            path = next(line.split(":", 2)[2] for line in own if "cpu" in line.split(":", 2)[1].split(","))
            self.parent = root / "cpu" / path.lstrip("/")
            self.path = self.parent / f"fedft-cpu-{uuid.uuid4().hex[:12]}"
            self.path.mkdir()
            if quota is not None:
                (self.path / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:  # cgroup v2: the parent must hand the cpu controller down (a root or delegated cgroup)
            path = next(line.split(":", 2)[2] for line in own if line.startswith("0::"))
            self.parent = root / path.lstrip("/")
            (self.parent / "cgroup.subtree_control").write_text("+cpu")
            self.path = self.parent / f"fedft-cpu-{uuid.uuid4().hex[:12]}"
            self.path.mkdir()
            if quota is not None:
                (self.path / "cpu.max").write_text(f"{quota} {self.PERIOD_US}")

    def enter(self) -> None:
        """Move the calling process into this cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def throttled_seconds(self) -> float:
        """How long the quota has held the cgroup's processes back so far, summed over the periods it throttled them
        (``cpu.stat``)."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        if "throttled_time" in stat:  # v1, nanoseconds
            return int(stat["throttled_time"]) / 1e9
        return int(stat.get("throttled_usec", 0)) / 1e6

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (self.parent / "cgroup.procs").write_text(pid)
            self.path.rmdir()
