"""Run named simulation cells one after another, resumably (a cell with a summary.json is not re-run)."""

from __future__ import annotations

import json
from pathlib import Path

from simulation.local_run import run_simulation


def run_cells(cells: dict[str, dict[str, object]], results_dir: Path, num_supernodes: int) -> dict[str, dict]:
    """``cells``: run name -> run-config overrides. Returns run name -> summary for the cells that finished."""
    results_dir = results_dir.resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    summaries = {}
    for name, overrides in cells.items():
        summary_file = results_dir / name / "summary.json"
        if not summary_file.exists():
            with (results_dir / f"{name}.log").open("wb") as log:
                code = run_simulation({**overrides, "results-dir": str(results_dir), "run-name": name},
                                      num_supernodes=num_supernodes, stream_to=log)
            if code != 0:
                print(f"{name}: failed, see {results_dir / (name + '.log')}", flush=True)
                continue
        summaries[name] = json.loads(summary_file.read_text())
        s = summaries[name]
        print(f"{name}: best {s['best_accuracy']:.4f} (round {s['best_round']}), last-10 mean {s['mean_last10_accuracy']:.4f}, "
              f"client seconds {s['total_client_train_seconds']:.1f}", flush=True)
    return summaries


def write_report(lines: list[str], path: Path) -> None:
    """Write a Markdown report and print it."""
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
