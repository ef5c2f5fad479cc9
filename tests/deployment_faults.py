"""Helpers for the fault tests of a loopback deployment (``tests/test_deployment_faults.py``): a deployment started
with the scripts in ``deployment/`` (TLS, SuperNode authentication), a TCP proxy to cut a node's connection, a
restart loop standing in for systemd's ``Restart=`` and a memory cap that makes a SuperNode run out of memory (the CPU
quota that makes one slower is ``benchmarks.cgroup.CpuCgroup``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.cgroup import MemoryCgroup
from deployment.loopback import LoopbackFederation
from simulation.local_run import free_port

#: The run settings every fault test shares: a small, fast FedAvg.
RUN = (
    'method="fedavg" model="lenet5" pretrain="none" local-epochs=1 dataset="fashion-mnist-mini" partitioner="iid" '
    "fraction-train=1.0 min-train-nodes=1"
)


def read_rounds(folder: Path) -> list[dict[str, Any]]:
    """The records of ``folder/rounds.jsonl`` (none while it does not exist)."""
    path = folder / "rounds.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


def trained(record: dict[str, Any]) -> list[int]:
    """Partition ids whose update a round accepted."""
    return sorted(s["partition_id"] for s in record["client_stats"])


class Proxy:
    """A TCP forwarder on ``listen_host``:port to ``target`` (TLS passes through unchanged). ``stop`` closes the
    listening socket and every open connection (a cut network); ``start`` opens it again on the same port."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.host, self.port, self.target = listen_host, free_port(), target
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _call(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers.difference_update((writer, up_writer))

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._writers.clear()

    def start(self) -> None:
        self._call(self._start())

    def stop(self) -> None:
        self._call(self._stop())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class MemoryCap(MemoryCgroup):
    """A ``MemoryCgroup`` (``benchmarks/cgroup.py``) capped in MiB, for a SuperNode, its SuperExec and every ClientApp
    they start to share (pass ``enter`` as their ``preexec_fn``); closing it never fails the test that made it."""

    def __init__(self, mib: int | None) -> None:
        super().__init__(None if mib is None else mib * 2**20)

    def set_mib(self, mib: int | None) -> None:
        """Change the cap while its processes run (None: no cap); see ``set_limit``."""
        self.set_limit(None if mib is None else mib * 2**20)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            super().close()


class Deployment(LoopbackFederation):
    """A ``LoopbackFederation`` whose SuperNodes are kept running by a restart loop like systemd's
    (``restart_seconds`` after one exits, as many times as needed), some reaching the SuperLink through a ``Proxy``;
    ``close`` stops the loop and the proxies too."""

    def __init__(self, tmp_path: Path, num_nodes: int, restart_seconds: float = 2.0) -> None:
        super().__init__(tmp_path, num_nodes)  # no SuperNode arguments, as the unit's template: retry for ever
        self.restart_seconds = restart_seconds
        self.proxies: list[Proxy] = []
        self._keep = [False] * num_nodes
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._watcher = threading.Thread(target=self._restart_loop, daemon=True)

    def via_proxy(self, i: int) -> Proxy:
        """Node ``i`` reaches the SuperLink through a proxy on 127.0.0.2 (call before ``start_nodes``)."""
        proxy = Proxy("127.0.0.2", ("127.0.0.1", self.port))
        proxy.start()
        self.proxies.append(proxy)
        self.node_address[i] = proxy.address
        return proxy

    def start_nodes(self) -> None:
        for i in range(self.num_nodes):
            self.start_node(i)
            self._keep[i] = True
        self._watcher.start()

    def kill_node(self, i: int) -> None:
        """``kill -9`` the SuperNode's process group (the SuperNode and the ClientApp it runs)."""
        pid = self.node_pid(i)
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)

    def _restart_loop(self) -> None:
        """Systemd's ``Restart=``: a SuperNode that exited is started again ``restart_seconds`` later."""
        down_since: dict[int, float] = {}
        while not self._closing.wait(0.5):
            for i in range(self.num_nodes):
                with self._lock:
                    if not self._keep[i]:
                        continue
                    if self.node_alive(i):
                        down_since.pop(i, None)
                        continue
                    since = down_since.setdefault(i, time.monotonic())
                    if time.monotonic() - since >= self.restart_seconds and not self._closing.is_set():
                        with contextlib.suppress(Exception):
                            self.start_node(i)
                        down_since.pop(i, None)

    def submit(self, run_name: str, settings: str) -> str:
        return super().submit(run_name, f"{RUN} {settings}")

    def close(self) -> list[int]:
        """Stop the restart loop, the SuperNodes, the SuperLink, the proxies; the PIDs that outlived stop.sh."""
        self._closing.set()
        if self._watcher.is_alive():
            self._watcher.join(timeout=30)
        leftovers = super().close()
        for proxy in self.proxies:
            proxy.close()
        return leftovers
