"""Start a private local SuperLink, submit ``flwr run`` to it, and stop it by PID afterwards.

``flwr run .`` alone starts a detached SuperLink that keeps running after the run and whose PID it does
not report. Here the SuperLink is our own child process, with its own ``FLWR_HOME`` and ports, stopped
(with everything it started) when the run ends or fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from flwr.proto.control_pb2 import ListRunsRequest
from flwr.supercore.control import ControlHttpClient

from profiling.spans import LAUNCH, span
from run_config.text import format_overrides
from simulation.app_files import stage_app

PROJECT_DIR = Path(__file__).resolve().parents[1]
CONNECTION = "fedft-local"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid``, read from /proc (Linux)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> list[int]:
    """Send ``sig`` to each PID; those already gone are skipped. Returns those this user may not signal."""
    refused = []
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            refused.append(pid)
    return refused


#: Environment variable set, with a fresh value, on every process of one local SuperLink and its runs.
RUN_MARKER = "FEDFT_LOCAL_SUPERLINK_ID"


def processes_marked(marker: str, variable: str = RUN_MARKER) -> list[int]:
    """PIDs of live processes (not this one) whose environment holds ``variable=marker``."""
    needle = f"{variable}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def stop_marked(marker: str, timeout: float = 30.0, grace: float = 1.0, variable: str = RUN_MARKER) -> None:
    """Stop, by PID, every process carrying ``marker`` under ``variable``: Ray's daemons detach from the SuperLink's
    tree."""
    stop_found(lambda: processes_marked(marker, variable), timeout, grace)


def stop_found(find_pids: Callable[[], list[int]], timeout: float = 30.0, grace: float = 1.0) -> None:
    """Stop, by PID, the processes ``find_pids`` returns: SIGTERM first, SIGKILL whatever still runs after ``grace``
    seconds. Processes found while it runs (started by those being stopped) are stopped in turn, until none is
    left, ``timeout`` has passed, or what is left cannot be stopped."""
    deadline = time.monotonic() + timeout
    while (pids := find_pids()) and time.monotonic() < deadline:
        if stop_processes(pids, grace, deadline - time.monotonic()):
            return


def stop_processes(
    pids: list[int], grace: float = 5.0, timeout: float = 30.0, first: signal.Signals = signal.SIGTERM
) -> list[int]:
    """Send each PID ``first`` (SIGTERM), SIGKILL whatever still runs after ``grace`` seconds, and return once all
    have ended (or after ``timeout``): a stop command that returns while its processes are still exiting leaves the
    caller racing them (a port still bound, a test that finds them running). A PID that a new process takes
    meanwhile is left alone (each is known by its start time). Returns the PIDs still running: not this user's, or
    unkillable."""
    started = start_times(pids)

    def running() -> list[int]:
        return still_running(started)

    refused = _signal_all(running(), first)
    deadline, killed_at = time.monotonic() + timeout, time.monotonic() + grace
    while True:
        left = [pid for pid in running() if pid not in refused]
        if not left or time.monotonic() >= deadline:
            return running()
        if time.monotonic() >= killed_at:
            refused += _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)


def start_times(pids: list[int]) -> dict[int, str | None]:
    """Each PID's start time (None once it has ended), which ``still_running`` compares later: a PID that a new
    process took meanwhile is not the process that was found."""
    return {pid: _start_time(pid) for pid in pids}


def still_running(started: Mapping[int, str | None]) -> list[int]:
    """The processes of ``started`` (a ``start_times``) that still run."""
    return [pid for pid, start in started.items() if start is not None and _start_time(pid) == start]


def _start_time(pid: int) -> str | None:
    """When ``pid`` started (field 22 of /proc/<pid>/stat, in clock ticks since boot), which tells it from a later
    process that reuses the PID; None once it has ended (a zombie waiting to be reaped counts as ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


#: Seconds a stopped run's simulation engine gets to end on its own before the rest of the run is stopped. It took
#: 5.3-5.5 s in our checks: the ServerApp records the stop at once, and Flower's force-exit timer ends the process
#: 5 s later (the ServerApp's thread goes on until then).
ENGINE_STOP_GRACE = 20.0


def command_line(pid: int) -> list[bytes]:
    """``pid``'s arguments, the program first, as /proc gives them (Linux); empty once it has ended."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def engine_processes(root: int) -> list[int]:
    """The simulation engines (``flwr-simulation``: Flower's engine, Ray's driver and the ServerApp) under ``root``."""
    return [
        pid
        for pid in descendants(root)
        if any(Path(arg.decode(errors="replace")).name == "flwr-simulation" for arg in command_line(pid)[:2])
    ]


def stop_engines(root: int, grace: float = ENGINE_STOP_GRACE) -> None:
    """Let a run that is being stopped end as Flower ends a run on Ctrl-C: SIGINT to each engine under ``root``,
    alone, and SIGKILL after ``grace`` seconds. Flower's SIGINT handler runs the ServerApp's exit handler, which
    writes summary.json as ``interrupted``. Neither SIGTERM nor stopping the whole tree at once does (observed: no
    summary.json): ``ray.init`` replaces Flower's SIGTERM handler with Ray's, which runs none of Flower's exit
    handlers."""
    if engines := engine_processes(root):
        stop_processes(engines, grace=grace, timeout=grace + 5.0, first=signal.SIGINT)


def stop_process_tree(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM ``process`` and its descendants by PID, then SIGKILL whatever is left after ``grace``."""
    pids = [*descendants(process.pid), process.pid]
    _signal_all(pids, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _signal_all(pids, signal.SIGKILL)
    process.wait()


@dataclass(frozen=True)
class Resources:
    """What each simulated client gets, and where Ray runs.

    ``gpus_per_client`` is Flower's ``client-resources-num-gpus``: a fraction lets several ClientApps share one
    GPU (0.1: ten at a time), and Ray then shows each actor only its GPU. ``ray_address`` points the simulation
    at a running Ray cluster (``ray start --head`` on one machine, ``ray start --address`` on the others) instead
    of starting a private Ray instance; the SuperLink passes it to ``ray.init`` through ``RAY_ADDRESS``.
    """

    cpus_per_client: int = 1
    gpus_per_client: float = 0.0
    ray_address: str = ""

    def federation_config(self, num_supernodes: int) -> str:
        """The ``--federation-config`` text for ``flwr run``."""
        text = f"num-supernodes={num_supernodes} client-resources-num-cpus={self.cpus_per_client}"
        if self.gpus_per_client > 0:
            text += f" client-resources-num-gpus={self.gpus_per_client}"
        return text


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """``--gpus-per-client`` and ``--ray-address``, as every simulation launcher takes them."""
    parser.add_argument(
        "--gpus-per-client",
        type=float,
        default=0.0,
        help="GPUs per simulated client, e.g. 0.1 for ten clients training at once on one GPU (default 0)",
    )
    parser.add_argument("--ray-address", default="", help="run on this existing Ray cluster (default: a private one)")


@dataclass(frozen=True)
class LocalSuperLink:
    """A running SuperLink in simulation mode."""

    address: str
    env: Mapping[str, str]
    process: subprocess.Popen


def _wait_for_port(port: int, process: subprocess.Popen, log_file: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with code {process.returncode}; see {log_file}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"flower-superlink did not open port {port} within {timeout:.0f} s; see {log_file}")


#: Environment for the run's processes, unless the user set these: the SuperExec picks the submitted run up within
#: 0.1 s instead of 1 s; torch's OpenMP threads wait for each other passively, since the ServerApp and the ClientApp
#: actors share the cores (a spinning thread whose peer was descheduled made a 2-thread training step 7x slower on
#: the shared 2-core machine; with passive waiting it ran at about the speed of one thread); Flower's processes send
#: no usage events to Flower's server (a process waits up to 4 s at exit for its event where the network is
#: slow, and a local run has no business on the network).
SIMULATION_ENV_DEFAULTS = {
    "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1",
    "OMP_WAIT_POLICY": "PASSIVE",
    "FLWR_TELEMETRY_ENABLED": "0",
}


@contextmanager
def local_superlink(flwr_home: Path, cwd: Path = PROJECT_DIR, ray_address: str = "") -> Iterator[LocalSuperLink]:
    """A private simulation SuperLink on free loopback ports, stopped by PID on exit.

    Its state lives in memory, so ``flwr ls`` lists only the runs of this SuperLink.

    The ServerApp runs in ``cwd``, so a relative ``results-dir`` is taken from there.
    """
    flwr_home.mkdir(parents=True, exist_ok=True)
    port, health = free_port(), free_port()
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",  # flower-superexec, flwr-serverapp, ...
        "FLWR_HOME": str(flwr_home),
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
        RUN_MARKER: uuid.uuid4().hex,
        **{key: value for key, value in SIMULATION_ENV_DEFAULTS.items() if key not in os.environ},
    }
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    address = f"127.0.0.1:{port}"
    (flwr_home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\naddress = "{address}"\ninsecure = true\n'
    )
    log_file = flwr_home / "superlink.log"
    command = [
        str(bin_dir / "flower-superlink"),
        "--insecure",
        "--simulation",
        "--isolation=subprocess",
        "--disable-runtime-dependency-installation",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--health-server-address=127.0.0.1:{health}",
    ]
    with log_file.open("ab") as log:
        process = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_for_port(port, process, log_file)
        yield LocalSuperLink(address, env, process)
    except BaseException:  # Ctrl-C, SIGTERM, a time-out: a run still going records that it was stopped
        stop_engines(process.pid)  # a second Ctrl-C or SIGTERM while it waits goes on to the stop below at once
        raise
    finally:
        with signals_ignored():  # stopping half of the run would leave the rest running, detached
            stop_process_tree(process)
            stop_marked(env[RUN_MARKER])


@contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM are ignored inside (in the main thread, where Python handles signals; elsewhere nothing
    changes), and the previous handlers are back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit in the main thread, so a running launcher's clean-up (stop the
    SuperLink and Ray by PID) runs; for the command-line entry points."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def run_simulation(
    overrides: Mapping[str, object],
    *,
    num_supernodes: int,
    resources: Resources = Resources(),
    flwr_home: Path | None = None,
    project_dir: Path = PROJECT_DIR,
    stream_to=None,
    timeout: float | None = None,
) -> int:
    """Run the app once in simulation; return ``flwr run``'s exit code. Output goes to ``stream_to``.

    Without ``flwr_home`` the SuperLink gets a fresh folder under ``.flwr-home/``, removed after a
    successful run; a failed or stopped run's keeps its superlink.log."""
    with span(LAUNCH):
        return _run_simulation(overrides, num_supernodes, resources, flwr_home, project_dir, stream_to, timeout)


def _run_simulation(
    overrides: Mapping[str, object],
    num_supernodes: int,
    resources: Resources,
    flwr_home: Path | None,
    project_dir: Path,
    stream_to,
    timeout: float | None,
) -> int:
    if flwr_home is not None:
        return _run_on_local_superlink(overrides, num_supernodes, resources, flwr_home, project_dir, stream_to, timeout)
    # Concurrent launchers must not share the connection in $FLWR_HOME/config.toml: each gets its own folder.
    (project_dir / ".flwr-home").mkdir(exist_ok=True)
    private_home = Path(tempfile.mkdtemp(prefix="run-", dir=project_dir / ".flwr-home"))
    code = None
    try:
        code = _run_on_local_superlink(
            overrides, num_supernodes, resources, private_home, project_dir, stream_to, timeout
        )
        return code
    finally:
        remove_run_home(private_home, keep_log=code != 0)


#: What a run's Flower home holds besides its log: the staged app and the copy Flower installs from its FAB.
APP_COPIES = ("app", "apps")


def remove_run_home(flwr_home: Path, keep_log: bool) -> None:
    """Remove a finished run's Flower home; a failed or stopped run's keeps superlink.log (what went wrong) and
    loses only the copies of the app (12 MB a run)."""
    if not keep_log:
        shutil.rmtree(flwr_home, ignore_errors=True)
        return
    for name in APP_COPIES:
        shutil.rmtree(flwr_home / name, ignore_errors=True)


def _run_on_local_superlink(
    overrides: Mapping[str, object],
    num_supernodes: int,
    resources: Resources,
    flwr_home: Path,
    project_dir: Path,
    stream_to,
    timeout: float | None,
) -> int:
    with local_superlink(flwr_home, cwd=project_dir, ray_address=resources.ray_address) as link:
        app = stage_app(project_dir, flwr_home / "app")  # what Flower packs, without walking .venv and the like
        command = [
            str(Path(sys.executable).parent / "flwr"),
            "run",
            str(app),
            CONNECTION,
            "--stream",
            "--federation-config",
            resources.federation_config(num_supernodes),
        ]
        if overrides:
            command += ["--run-config", format_overrides(overrides)]
        run = subprocess.Popen(
            command, env=dict(link.env), stdout=stream_to, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = run.wait(timeout=timeout)
        finally:
            if run.poll() is None:
                stop_process_tree(run)
        # `flwr run --stream` exits 0 even when the ServerApp failed; the SuperLink knows better.
        if code:
            return code
        statuses = final_statuses(link)
        if statuses != ["finished:completed"]:
            message = f"run status on the SuperLink: {statuses}\n"
            if stream_to is None:
                print(message, end="", flush=True)
            else:
                stream_to.write(message.encode())
        return 0 if statuses == ["finished:completed"] else 1


def final_statuses(link: LocalSuperLink, timeout: float = 60.0) -> list[str]:
    """The runs' statuses once none is still running: the stream can end a moment before the SuperLink
    marks the run finished, most often on a busy machine."""
    deadline = time.monotonic() + timeout
    statuses = run_statuses(link)
    while not all(s.startswith("finished") for s in statuses) and time.monotonic() < deadline:
        time.sleep(0.5)
        statuses = run_statuses(link)
    return statuses


def run_statuses(link: LocalSuperLink) -> list[str]:
    """Status of every run the SuperLink has seen (``finished:completed``, ``finished:failed``, ...), as ``flwr ls``
    shows it, asked over the Control API from this process (a ``flwr ls`` subprocess spent 1.6 s importing the CLI)."""
    client = ControlHttpClient.from_server_address(link.address, insecure=True, root_certificates=None, interceptors=[])
    try:
        runs = client.ListRuns(ListRunsRequest()).run_dict.values()
    except Exception as err:  # any failure to ask is reported as a status, never raised
        return [f"unknown: {type(err).__name__}: {str(err)[:200]}"]
    finally:
        client.close()
    return [
        f"{run.status.status}:{run.status.sub_status}" if run.status.sub_status else run.status.status for run in runs
    ]
