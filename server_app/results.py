"""The results contract: ``<results-dir>/<run-name>/`` with config.json, rounds.jsonl, summary.json
and model.pt (a plain state dict, loadable with ``torch.load`` alone); a method adds its own files through
``server_app/result_files.py`` (KAFAL's cycles.jsonl, one row per cycle).

accuracy.png (when matplotlib is installed) plots accuracy against round and against client seconds.
summary.json says how the run ended: ``status`` is ``completed``, ``failed`` (no round aggregated a single update:
every client failed, was rejected or timed out, so the "final" model is the initial one) or ``interrupted`` (stopped
before its last round; the checkpoint holds the model so far), with the counts of rounds aggregated and skipped.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from logging import ERROR, INFO, WARNING
from pathlib import Path
from typing import Any

import torch
from flwr.common.logger import log

from models.device import describe_machine
from run_config import RunConfig, dataset_info
from server_app.atomic_write import replace_file, replace_text
from server_app.collapse import round_warning, run_warnings
from server_app.result_files import ResultFile, Row
from server_app.run_plot import write_run_plot

CONFIG_FILE, ROUNDS_FILE, SUMMARY_FILE, MODEL_FILE = "config.json", "rounds.jsonl", "summary.json", "model.pt"
LABEL_COUNTS_FILE = "label_counts.json"
#: How long a stop waits for a round being recorded in another thread (normally milliseconds) before it records the
#: stop anyway: Flower ends the process 5 s after its exit handlers start.
STOP_WAIT_SECONDS = 3.0
#: A method's own summary fields, from the rounds recorded (e.g. the best accuracy of a model it adds).
SummaryFields = Callable[[list[dict[str, Any]]], dict[str, Any]]


def run_directory(config: RunConfig, now: datetime | None = None, method: str | None = None) -> Path:
    """``<results-dir>/<run-name>``; an empty run-name becomes ``<method>-<dataset>-<timestamp>``."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    name = config.run_name or f"{method or config.method}-{config.dataset}-{stamp}"
    return Path(config.results_dir).expanduser().resolve() / name


def learning_efficiency(best_accuracy: float, total_client_seconds: float) -> float:
    """Best accuracy in percent per second of local training summed over all clients and rounds
    (the FedFT-EDS paper's §IV-D measure)."""
    return 100.0 * best_accuracy / total_client_seconds if total_client_seconds > 0 else float("nan")


def _json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON; write them as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps({k: _json_safe(v) for k, v in record.items()}) + "\n"


def failure_reason(rounds: list[dict[str, Any]]) -> str:
    """Why no update was aggregated: the first client error, rejection or time-out recorded."""
    for record in rounds:
        for kind in ("failed", "rejected"):
            for item in record.get(kind) or []:
                return f"round {record['round']}: client {item['partition_id']} {kind}: {item['reason']}"
        if record.get("timed_out"):
            return f"round {record['round']}: no reply within round-timeout from clients {record['timed_out']}"
    return "no client took part in any round"


def best_other_accuracies(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """``best_<name>`` for every other accuracy the rounds record (``<name>`` ending in ``_accuracy``: FedFSC's
    base model, federated evaluation), over the rounds that have one."""
    names = sorted({k for r in rounds for k in r if k.endswith("_accuracy") and k != "accuracy"})
    best = {
        name: max((r[name] for r in rounds if isinstance(r.get(name), (int, float))), default=None) for name in names
    }
    return {f"best_{name}": value for name, value in best.items() if value is not None}


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


class RunRecorder:
    """Collects each round from the strategy and the central evaluation, and writes the results files."""

    def __init__(
        self,
        directory: Path,
        config: RunConfig,
        method: str | None = None,
        resume_from: dict[str, Any] | None = None,
        machine: dict[str, Any] | None = None,
        files: Sequence[ResultFile] = (),
        settle_checkpoint: Callable[[], None] = lambda: None,
    ) -> None:
        """Start the results files; ``resume_from`` (a ``state()``) carries on a run, rewriting the rounds (and the
        rows of the method's ``files``) it had finished, so rounds a killed run recorded after its last checkpoint
        are dropped. ``machine`` (see ``models.device.compute_description``) is what the server computes on, written
        into the summary. ``settle_checkpoint`` waits for a checkpoint still being written
        (``CheckpointWriter.settle``), so that a stop records the rounds of the checkpoint on disk."""
        self.directory = directory
        self.config = config
        self.method = method or config.method
        self.classes = dataset_info(config).num_classes  # chance level is 1 / classes
        self.machine = machine
        self.rounds: list[dict[str, Any]] = list(resume_from["rounds"]) if resume_from else []
        #: The pretraining round's record (``server_app/pretraining_round.py``), rounds.jsonl's first line; None
        #: when the run has none.
        self.pretraining_round: dict[str, Any] | None = resume_from.get("pretraining_round") if resume_from else None
        self.initial_accuracy: float | None = resume_from["initial_accuracy"] if resume_from else None
        #: SHA-256 of the whole model the federated rounds start from (after the pretraining round, if any): runs
        #: that are compared must share it (``experiments/paired.py``).
        self.start_fingerprint: str | None = resume_from.get("start_fingerprint") if resume_from else None
        self.initial_class_accuracy: list[float | None] | None = (
            resume_from.get("initial_class_accuracy") if resume_from else None
        )
        if len({f.name for f in files}) < len(files):
            raise ValueError(f"result files named twice: {[f.name for f in files]}")
        self.files = tuple(files)
        restored = resume_from.get("files", {}) if resume_from else {}
        #: The rows of each of the method's files, by name.
        self.rows: dict[str, list[Row]] = {f.name: list(restored.get(f.name, [])) for f in self.files}
        self._pending: dict[str, Any] = {}
        self._reported: list[tuple[ResultFile, Row]] = []
        #: Rounds before this index were trained from another start (a method that restarted its model): collapse
        #: warnings compare a round only with the rounds since.
        self._since = self._restart_index()
        self._round_start = 0.0
        self.finished = False
        #: Held while a round is being recorded and checkpointed, and by ``stopped``: in Flower's simulation engine a
        #: stopped run's exit handler runs in another thread than the ServerApp's, which must not record on after it.
        self.writing = threading.RLock()
        #: The results as of the last checkpoint on disk (a resumed run starts from its checkpoint's): what a stop
        #: keeps.
        self.at_checkpoint = self.state()
        self.settle_checkpoint = settle_checkpoint
        #: The last summary.json written (what ``finish`` returns once the run was stopped).
        self.written_summary: dict[str, Any] = {}
        self.method_summaries: list[SummaryFields] = []
        directory.mkdir(parents=True, exist_ok=True)
        self._write_rounds()
        replace_text(directory / CONFIG_FILE, json.dumps(config.to_dict(), indent=2) + "\n")
        for file in self.files:
            if self.rows[file.name]:
                replace_text(directory / file.file_name, "".join(_json_line(row) for row in self.rows[file.name]))

    def _write_rounds(self) -> None:
        """rounds.jsonl anew: the pretraining round's record, if any, then the rounds."""
        records = ([self.pretraining_round] if self.pretraining_round else []) + self.rounds
        replace_text(self.directory / ROUNDS_FILE, "".join(_json_line(r) for r in records))

    def pretraining_round_done(self, record: dict[str, Any]) -> None:
        """The pretraining round's record (round 0, before the federated rounds): rounds.jsonl's first line, and the
        summary's ``pretraining_round``."""
        self.pretraining_round = record
        self._write_rounds()
        epochs = sorted(record["epochs"].values())
        log(
            INFO,
            "pretraining round%s: %d clients trained %s epochs (%.1f s in all); accuracy %.4f after pretraining, "
            "%.4f after the round (the start of the federated rounds)",
            " (from the cache)" if record.get("cached") else "",
            len(record["epochs"]),
            f"{epochs[0]}-{epochs[-1]}" if epochs[0] != epochs[-1] else epochs[0],
            record["client_train_seconds"],
            record["pretrained_accuracy"],
            record["accuracy"],
        )
        for kind in ("failed", "rejected"):
            for item in record.get(kind) or []:
                log(WARNING, "pretraining round: client %d %s: %s", item["partition_id"], kind, item["reason"])

    def add_summary(self, fields: SummaryFields) -> None:
        """Have summary.json also hold ``fields(rounds)`` (a method reporting more than the global model)."""
        self.method_summaries.append(fields)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the results so far."""
        return {
            "rounds": list(self.rounds),
            "pretraining_round": self.pretraining_round,
            "initial_accuracy": self.initial_accuracy,
            "initial_class_accuracy": self.initial_class_accuracy,
            "start_fingerprint": self.start_fingerprint,
            "files": {name: list(rows) for name, rows in self.rows.items()},
        }

    def checkpointed(self, state: dict[str, Any]) -> None:
        """``state`` (a ``state()``) is now saved in the run's checkpoint (called by the thread that wrote it)."""
        self.at_checkpoint = state

    def report(self, file: ResultFile, fields: Row) -> None:
        """A row of one of the method's files; it is written (completed by ``file.row``) when this round is
        evaluated."""
        if file.name not in self.rows:
            raise ValueError(f"result file {file.name!r} is not one of the run's method's ({sorted(self.rows)})")
        self._reported.append((file, fields))

    def _restart_index(self) -> int:
        """How many rounds were trained before the last restart a method's rows record (0: none)."""
        restarts = [
            server_round
            for file in self.files
            if file.restarted_after is not None
            for row in self.rows[file.name]
            if (server_round := file.restarted_after(row)) is not None
        ]
        return sum(1 for r in self.rounds if restarts and r["round"] <= max(restarts))

    def _write_reported(self, record: dict[str, Any]) -> None:
        """The rows reported during the round ``record`` completes, each appended to its file."""
        reported, self._reported = self._reported, []
        for file, fields in reported:
            row = file.row(fields, record, self.rounds)
            self.rows[file.name].append(row)
            with (self.directory / file.file_name).open("a") as handle:
                handle.write(_json_line(row))
            if file.describe is not None:
                log(INFO, "%s", file.describe(row))
        self._since = self._restart_index()

    def round_started(self, server_round: int, cohort: list[int], bytes_down: int, **fields: Any) -> None:
        """A round's cohort (in selection order), the bytes sent, and per-round fields such as cohort metrics."""
        self._round_start = time.perf_counter()
        self._pending = {"round": server_round, "clients": list(cohort), "bytes_down": bytes_down, "fields": fields}

    def replies_received(
        self, server_round: int, client_stats: list[dict[str, Any]], bytes_up: int, **fields: Any
    ) -> None:
        """The accepted clients' statistics, the bytes received, and per-round fields such as who failed."""
        order = {pid: i for i, pid in enumerate(self._pending.get("clients", []))}
        stats = sorted(client_stats, key=lambda s: order.get(s["partition_id"], len(order)))
        self._pending.update(
            num_examples=sum(s["num_examples"] for s in stats),
            client_train_seconds=sum(s["train_seconds"] for s in stats),
            bytes_up=bytes_up,
            client_stats=stats,
            reply_fields=fields,
        )

    def evaluations_received(self, server_round: int, **fields: Any) -> None:
        """The clients' federated evaluation of the round's model (their mean loss and accuracy, who was refused)."""
        self._pending.setdefault("evaluation_fields", {}).update(fields)

    def started_from(self, fingerprint: str) -> None:
        """The fingerprint (``models.fingerprint.state_fingerprint``) of the model the federated rounds start from."""
        self.start_fingerprint = fingerprint

    def evaluated(self, server_round: int, loss: float | None, accuracy: float | None, **fields: Any) -> None:
        """Central evaluation after a round (round 0 = the initial model) completes that round's record; ``fields``
        are further evaluations: each class's test accuracy (``class_accuracy``, a list indexed by class, ``None``
        for a class absent from the test set; the initial model's goes to the summary), what a method adds (FedFSC's
        ``base_accuracy``). A round that ``evaluate-every`` does not score has ``loss`` and ``accuracy`` None."""
        if server_round == 0:
            self.initial_accuracy = accuracy
            self.initial_class_accuracy = fields.get("class_accuracy")
            log(INFO, "initial model: accuracy %.4f, loss %.4f", accuracy, loss)
            return
        record = {
            "round": server_round,
            "accuracy": accuracy,
            "loss": loss,
            "clients": self._pending.get("clients", []),
            "num_examples": self._pending.get("num_examples", 0),
            "client_train_seconds": self._pending.get("client_train_seconds", 0.0),
            "bytes_down": self._pending.get("bytes_down", 0),
            "bytes_up": self._pending.get("bytes_up", 0),
            "wall_seconds": time.perf_counter() - self._round_start,
            "client_stats": self._pending.get("client_stats", []),
            **self._pending.get("fields", {}),
            **self._pending.get("reply_fields", {}),
            **self._pending.get("evaluation_fields", {}),
            **fields,
        }
        start = self.initial_accuracy if self._since == 0 else None  # a restarted model has no start to compare with
        earlier = [start, *(r["accuracy"] for r in self.rounds[self._since :])]
        warning = None if accuracy is None else round_warning(accuracy, earlier, self.classes)
        if warning is not None:
            record["warning"] = warning
        self.rounds.append(record)
        with (self.directory / ROUNDS_FILE).open("a") as handle:
            handle.write(_json_line(record))
        if self._reported:
            self._write_reported(record)
        log(
            INFO if warning is None else WARNING,
            "round %d: %s, %.1f s (clients trained %.1f s)%s%s",
            server_round,
            "not evaluated (evaluate-every)" if accuracy is None else f"accuracy {accuracy:.4f}, loss {loss:.4f}",
            record["wall_seconds"],
            record["client_train_seconds"],
            self._cohort_text(record),
            "" if warning is None else f"; warning: the global model is {warning}",
        )
        self._pending = {}

    def _cohort_text(self, record: dict[str, Any]) -> str:
        """Where the server chose a cohort (FedEntOpt, or a fraction of the clients): who, and the label entropy of
        their combined label counts against its maximum, log2 C."""
        entropy = record.get("cohort_label_entropy")
        if entropy is None or (self.config.client_selection != "fedentopt" and self.config.fraction_train >= 1):
            return ""
        return f"; cohort {record['clients']}: label entropy {entropy:.2f} of {math.log2(self.classes):.2f} bits"

    def summary(self, status: str | None = None) -> dict[str, Any]:
        """The run's summary; ``status`` defaults to ``completed``, or ``failed`` when no round aggregated."""
        scored = [r for r in self.rounds if r["accuracy"] is not None]  # `evaluate-every` leaves rounds unscored
        best = max(scored, key=lambda r: r["accuracy"], default=None)
        total_seconds = sum(r["client_train_seconds"] for r in self.rounds)
        aggregated = sum(1 for r in self.rounds if r.get("aggregated", True))
        status = status or ("completed" if aggregated else "failed")
        return {
            "method": self.method,
            "status": status,
            "failure": failure_reason(self.rounds) if status == "failed" else None,
            "rounds": len(self.rounds),
            "rounds_aggregated": aggregated,
            "rounds_skipped": len(self.rounds) - aggregated,
            "initial_accuracy": self.initial_accuracy,
            "initial_class_accuracy": self.initial_class_accuracy,
            "start_fingerprint": self.start_fingerprint,
            "best_accuracy": best["accuracy"] if best else None,
            "best_round": best["round"] if best else None,
            "final_accuracy": scored[-1]["accuracy"] if scored else None,
            "total_client_train_seconds": total_seconds,
            "learning_efficiency": learning_efficiency(best["accuracy"], total_seconds) if best else None,
            **self._pretraining_round_summary(best["accuracy"] if best else None, total_seconds),
            "total_bytes_down": sum(r["bytes_down"] for r in self.rounds),
            "total_bytes_up": sum(r["bytes_up"] for r in self.rounds),
            "mean_cohort_label_entropy": _mean(r.get("cohort_label_entropy") for r in self.rounds),
            "mean_last10_accuracy": _mean(r["accuracy"] for r in self.rounds[-10:]),
            "warnings": run_warnings(self.rounds, self.classes),
            **{
                key: value
                for file in self.files
                if file.summary is not None and self.rows[file.name]
                for key, value in file.summary(self.rows[file.name]).items()
            },
            **best_other_accuracies(self.rounds),
            **{key: value for fields in self.method_summaries for key, value in fields(self.rounds).items()},
            "best_client_accuracy_mean": max(
                (r["client_accuracy_mean"] for r in self.rounds if r.get("client_accuracy_mean") is not None),
                default=None,
            ),
            **({"machine": self.machine} if self.machine else {}),
        }

    def _pretraining_round_summary(self, best: float | None, rounds_seconds: float) -> dict[str, Any]:
        """The pretraining round in the summary (without its per-client numbers, which rounds.jsonl holds), and the
        learning efficiency counting its client seconds too: ``learning_efficiency`` counts the federated rounds'
        alone, as the FedFT-EDS paper's §IV-D measure."""
        phase = self.pretraining_round
        if phase is None:
            return {"pretraining_round": None}
        with_phase = rounds_seconds + phase["client_train_seconds"]
        kept = ("pretrained_accuracy", "accuracy", "client_train_seconds", "epochs", "bytes_down", "bytes_up")
        return {
            "pretraining_round": {
                **{k: phase[k] for k in kept},
                "clients": len(phase["epochs"]),
                "failed": len(phase.get("failed") or []),
                "rejected": len(phase.get("rejected") or []),
                "timed_out": len(phase.get("timed_out") or []),
                "tolerance": phase["tolerance"],
                "max_epochs": phase["max_epochs"],
                "cached": phase["cached"],
            },
            "total_client_train_seconds_with_pretraining_round": with_phase,
            "learning_efficiency_with_pretraining_round": (
                learning_efficiency(best, with_phase) if best is not None else None
            ),
        }

    def write_label_counts(self, counts: dict[str, list[float]]) -> None:
        """The label counts the server used (partition id -> counts)."""
        replace_text(self.directory / LABEL_COUNTS_FILE, json.dumps(counts, indent=1) + "\n")

    def _write_summary(self, status: str | None, extra: dict[str, Any]) -> dict[str, Any]:
        summary = {k: _json_safe(v) for k, v in {**self.summary(status), **extra}.items()}
        replace_text(self.directory / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        self.written_summary = summary
        return dict(summary)

    def finish(self, state_dict: dict[str, torch.Tensor], **extra: Any) -> dict[str, Any]:
        """Write summary.json (with ``extra`` fields, e.g. the pretraining report) and the final global model;
        log a short readable summary; return the summary. A run stopped meanwhile (a signal during its last round)
        keeps the summary written then, and gets no model.pt: its checkpoint holds the model of its last round."""
        with self.writing:
            if self.finished:
                return dict(self.written_summary)
            replace_file(self.directory / MODEL_FILE, lambda handle: torch.save(state_dict, handle))
            self.finished = True
            summary = self._write_summary(None, extra)
        for line in readable_summary(summary):
            level = WARNING if line.startswith("warning:") else INFO if summary["status"] == "completed" else ERROR
            log(level, "%s", line)
        title = run_title(self.config, self.method)
        for file in self.files:
            if file.plot is not None and self.rows[file.name]:
                file.plot(self.directory, self.rows[file.name], title)
        if write_run_plot(self.directory, self.rounds, self.initial_accuracy, title) is None:
            log(INFO, "no accuracy.png: nothing to plot, or matplotlib is not installed (pip install '.[experiments]')")
        log(INFO, "results written to %s", self.directory)
        return summary

    def stopped(
        self, status: str, failure: str | None = None, wait: float = STOP_WAIT_SECONDS
    ) -> dict[str, Any] | None:
        """Record a run that ended before its last round: ``interrupted`` (a signal, Ctrl-C) or ``failed`` (an
        error, named in ``failure``). The results go back to those of the last checkpoint (rounds.jsonl and the
        method's files rewritten), so that summary.json, rounds.jsonl and the checkpoint hold the same rounds wherever
        the stop lands, even between a round's record and its checkpoint; the checkpoint holds the model. Waits up to
        ``wait`` seconds for a round being recorded in another thread. Nothing once the run has finished."""
        waited = self.writing.acquire(timeout=wait)
        try:
            if self.finished:
                return None
            self.finished = True
            self.settle_checkpoint()
            self.rounds = list(self.at_checkpoint["rounds"])
            self.pretraining_round = self.at_checkpoint.get("pretraining_round")
            kept = self.at_checkpoint.get("files", {})
            self.rows = {f.name: list(kept.get(f.name, [])) for f in self.files}
            self._write_rounds()
            for file in self.files:
                rows, path = self.rows[file.name], self.directory / file.file_name
                if rows or path.exists():
                    replace_text(path, "".join(_json_line(row) for row in rows))
            return self._write_summary(status, {"failure": failure} if failure else {})
        finally:
            if waited:
                self.writing.release()


def split_label(config: RunConfig) -> str:
    """How the clients' data is split: Dir(α), #C=k (labels per client) or IID."""
    if config.partitioner == "dirichlet":
        return f"Dir({config.dirichlet_alpha:g})"
    if config.partitioner == "pathological":
        return f"#C={config.classes_per_client}"
    return "IID"


def run_title(config: RunConfig, method: str) -> str:
    """A run's plots' title: method, dataset, split, model and start."""
    start = {
        "public": "pretrained on the server's share",
        "dataset": f"pretrained on {config.pretrain_dataset}",
        "checkpoint": "from a checkpoint",
        "none": "from random weights",
    }[config.pretrain] + (", then a pretraining round" if config.pretrain_round else "")
    selection = ", FedEntOpt selection" if config.client_selection == "fedentopt" else ""
    return f"{method} on {config.dataset}, {split_label(config)} split{selection}; {config.model} {start}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def readable_summary(summary: dict[str, Any]) -> list[str]:
    """A few lines for the end of the log: how the run ended and what it reached."""
    lines = [
        f"run {summary['status']}: {summary['rounds_aggregated']} of {summary['rounds']} rounds aggregated"
        + (f", {summary['rounds_skipped']} skipped" if summary["rounds_skipped"] else "")
    ]
    if summary["status"] == "failed":
        lines.append(f"nothing was trained; first problem: {summary['failure']}")
    lines.append(
        f"accuracy: initial {_percent(summary['initial_accuracy'])}, best {_percent(summary['best_accuracy'])}"
        f" (round {summary['best_round']}), final {_percent(summary['final_accuracy'])}"
    )
    efficiency, best, start = (summary.get(k) for k in ("learning_efficiency", "best_accuracy", "initial_accuracy"))
    learned = efficiency is not None and best is not None and (start is None or best > start)
    lines.append(
        f"client training time {summary['total_client_train_seconds']:.1f} s"
        + (
            f"; learning efficiency {efficiency:.3f} %/s (best accuracy ÷ client training seconds, the FedFT-EDS "
            "paper's §IV-D measure for comparing methods on one machine)"
            if learned
            else ""
        )
    )
    if phase := summary.get("pretraining_round"):
        lines.append(
            f"pretraining round: accuracy {_percent(phase['pretrained_accuracy'])} -> {_percent(phase['accuracy'])}, "
            f"its clients trained {phase['client_train_seconds']:.1f} s"
            + (" (when it ran; cached)" if phase["cached"] else "")
            + (
                f"; learning efficiency counting it {summary['learning_efficiency_with_pretraining_round']:.3f} %/s"
                if learned and summary.get("learning_efficiency_with_pretraining_round") is not None
                else ""
            )
        )
    lines.extend(f"warning: {warning}" for warning in summary.get("warnings") or [])
    if machine := summary.get("machine"):
        lines.append(f"server computed on {machine['device']}: {describe_machine(machine)}")
    return lines
