"""The benchmarks, one command: what a user runs to judge the app's time, memory and robustness.

    python -m benchmarks                  # the list
    python -m benchmarks NAME --help      # what NAME measures, how, and where it writes
    python -m benchmarks NAME [OPTIONS]   # run it
    python -m benchmarks docs [--check]   # docs/benchmarks.md's recorded figures again, from the recorded files

A benchmark's module is imported only when it runs, so the list needs nothing but Python, and a machine without flwr
still runs ``gpu-round --parts cohort-training`` (``scripts/gpu_check.sh`` does). docs/benchmarks.md shows each
benchmark's last recorded figure between ``<!-- recorded: NAME -->`` and ``<!-- /recorded -->``, written by ``docs``
from the files the benchmark wrote (``recorded_figure``); ``docs --check`` (and a test) fails where the page differs.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable

from benchmarks import PROJECT_DIR

#: name -> (module, what it measures).
BENCHMARKS: dict[str, tuple[str, str]] = {
    "default-run": (
        "benchmarks.default_run",
        "the default run (make run): wall time, peak memory, accuracy and where the time went; beside another checkout",
    ),
    "scale": (
        "benchmarks.scale",
        "round time and peak memory against the population and the clients per round; the launcher's memory estimate",
    ),
    "memory-limit": ("benchmarks.memory_limit", "the least memory a whole simulation needs, in a memory cgroup (root)"),
    "edge-client": ("benchmarks.edge_client", "a FedFT-EDS client's peak memory and round time on a small node"),
    "pfl-side-by-side": (
        "benchmarks.pfl_side_by_side",
        "one FedAvg or FedFT-EDS job run by this app (Flower and in-process) and by pfl-research, alternating",
    ),
    "gpu-round": (
        "benchmarks.gpu_round",
        "a round on one GPU: ten clients sharing it under Ray; batched cohorts against one client at a time",
    ),
    "scoring-layout": ("benchmarks.scoring_layout", "forward-only scoring in NCHW against channels-last, per CNN"),
    "quick-reference": (
        "benchmarks.quick_reference",
        "every command of the methods' quick reference, as written: exit code, wall time, load, accuracies",
    ),
    "attacks": (
        "benchmarks.attacks",
        "hostile clients against every aggregation rule, and what the default defence costs honest runs",
    ),
    "suite-time": ("benchmarks.suite_time", "make test on a fresh clone, as CI runs it: install, tests, slowest tests"),
}
DOCS_PAGE = PROJECT_DIR / "docs" / "benchmarks.md"
RECORDED_BLOCK = re.compile(r"(<!-- recorded: ([a-z-]+) -->\n)(.*?)(<!-- /recorded -->)", re.DOTALL)


def listing() -> str:
    """The usage and every benchmark with what it measures."""
    width = max(map(len, BENCHMARKS))
    rows = [f"  {name:{width}}  {what}" for name, (_, what) in BENCHMARKS.items()]
    return "\n".join([__doc__.split("\n\n")[1], "", "benchmarks:", *rows])


def recorded_figure(name: str) -> str:
    """Benchmark ``name``'s last recorded figure, as Markdown."""
    return str(importlib.import_module(BENCHMARKS[name][0]).recorded_figure())


def render(page: str, figure: Callable[[str], str] = recorded_figure) -> str:
    """``page`` with each recorded block's body replaced by its benchmark's ``figure``."""

    def block(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in BENCHMARKS:
            raise ValueError(f"docs/benchmarks.md: no benchmark {name!r} to record ({', '.join(BENCHMARKS)})")
        return f"{match.group(1)}\n{figure(name).strip()}\n\n{match.group(4)}"

    return RECORDED_BLOCK.sub(block, page)


def docs(check: bool) -> int:
    """Write the recorded figures into docs/benchmarks.md; with ``check``, only say whether it is up to date."""
    page = DOCS_PAGE.read_text()
    fresh = render(page)
    if fresh == page:
        return 0
    if check:
        print(f"{DOCS_PAGE} differs from its recorded files: run python -m benchmarks docs", file=sys.stderr)
        return 1
    DOCS_PAGE.write_text(fresh)
    print(f"wrote {DOCS_PAGE}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, rest = args[0], args[1:]
    if name == "docs":
        if set(rest) - {"--check"}:
            print("usage: python -m benchmarks docs [--check]", file=sys.stderr)
            return 2
        return docs(check="--check" in rest)
    if name not in BENCHMARKS:
        print(f"no benchmark {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    code = importlib.import_module(BENCHMARKS[name][0]).main(rest)
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
