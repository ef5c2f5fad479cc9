"""Where a profiled run's wall time went: its spans (``profiling.spans``) laid on one time line and every instant
given to exactly one phase, so the phases add up to the wall time.

The ServerApp's spans nest (a round's steps inside the run); at each instant the innermost one names the phase. While
the server waits for replies (``exchange``) the clients' spans say what the wait was: ``client-compute`` when any
client computes, else ``client-data`` when any loads data, else ``client-decode`` (building the model from the
message), else ``client-other`` (the rest of a client's handling: its reply, Flower's wrapper), else ``transfer``
(no client busy: messages queued, moving between processes, or waiting for a poll). An exchange inside
``node-wait`` or ``label-counts`` (the start-up queries) counts as that query phase. Instants inside the ServerApp
that no step claims are ``other`` (Flower's round loop, logging); the launcher's time before the ServerApp starts
is ``startup`` (SuperLink, Flower, Ray, the app's imports) and after it ends ``shutdown``. The server pretrains in a
background thread while it waits for its clients: the spans overlap, the instants they share count as ``node-wait``
(the later, innermost span) and what pretraining takes beyond the wait as ``pretraining``.

Round r runs from the start of its ``sampling`` to the start of round r + 1's (the last round ends where
``finish`` starts); what comes before round 1 is the run's ``start``, what comes after the last round its ``end``.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from profiling.spans import (
    CLIENT_COMPUTE,
    CLIENT_DATA,
    CLIENT_DECODE,
    CLIENT_MESSAGE,
    EXCHANGE,
    FINISH,
    LABEL_COUNTS,
    LAUNCH,
    NODE_WAIT,
    SAMPLING,
    SERVER,
)

STARTUP, SHUTDOWN, OTHER, TRANSFER, CLIENT_OTHER = "startup", "shutdown", "other", "transfer", "client-other"
#: Client spans in the order they win an instant of an exchange (any client computing makes it compute time).
CLIENT_PRIORITY = (CLIENT_COMPUTE, CLIENT_DATA, CLIENT_DECODE, CLIENT_MESSAGE)
CLIENT_SPANS = frozenset(CLIENT_PRIORITY)
#: Server phases whose exchanges are start-up queries, not a round's work.
QUERY_PHASES = (NODE_WAIT, LABEL_COUNTS)


def _client_phase(name: str) -> str:
    return CLIENT_OTHER if name == CLIENT_MESSAGE else name


@dataclass
class Profile:
    """Seconds per phase before the first round, in each round, and after the last; together they are the wall time.

    ``client_seconds`` sums each client span's own duration per round (clients working side by side each count).
    """

    wall_seconds: float
    start: dict[str, float] = field(default_factory=dict)
    rounds: dict[int, dict[str, float]] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    client_seconds: dict[int, dict[str, float]] = field(default_factory=dict)

    def phase_total(self) -> float:
        """The phases' seconds added up (equal to ``wall_seconds`` up to rounding)."""
        parts = [self.start, self.end, *self.rounds.values()]
        return sum(sum(part.values()) for part in parts)

    def round_seconds(self, server_round: int) -> float:
        return sum(self.rounds[server_round].values())

    def overhead(self, server_round: int) -> float:
        """A round's wall time outside client compute."""
        return self.round_seconds(server_round) - self.rounds[server_round].get(CLIENT_COMPUTE, 0.0)

    def median_round(self, rounds: Iterable[int]) -> dict[str, float]:
        """Per phase, the median of its seconds over ``rounds`` (0 where a round has none of it)."""
        chosen = [self.rounds[r] for r in rounds if r in self.rounds]
        phases = {phase for part in chosen for phase in part}
        return {phase: statistics.median(part.get(phase, 0.0) for part in chosen) for phase in phases} if chosen else {}

    def as_json(self) -> dict[str, Any]:
        return {
            "wall_seconds": self.wall_seconds,
            "start": self.start,
            "rounds": {str(r): phases for r, phases in sorted(self.rounds.items())},
            "end": self.end,
            "client_seconds": {str(r): phases for r, phases in sorted(self.client_seconds.items())},
        }


def _window(spans: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    for name in (LAUNCH, SERVER):
        outer = [s for s in spans if s["name"] == name]
        if outer:
            return min(s["start"] for s in outer), max(s["end"] for s in outer)
    raise ValueError("the profile holds neither a launch nor a server span")


def _round_starts(spans: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    starts: dict[int, float] = {}
    for s in spans:
        if s["name"] == SAMPLING and s.get("round") is not None:
            starts[s["round"]] = min(starts.get(s["round"], s["start"]), s["start"])
    return sorted((t, r) for r, t in starts.items())


def _phase_at(server_active: list[Mapping[str, Any]], clients: Counter, in_server: bool, before_server: bool) -> str:
    if not in_server:
        return STARTUP if before_server else SHUTDOWN
    names = [s["name"] for s in server_active]
    innermost = max(server_active, key=lambda s: (s["start"], -s["end"]))["name"]
    queries = [name for name in names if name in QUERY_PHASES]
    if queries:
        return queries[-1] if innermost in (EXCHANGE, *QUERY_PHASES) else innermost
    if innermost == EXCHANGE:
        busy = next((name for name in CLIENT_PRIORITY if clients[name] > 0), None)
        return _client_phase(busy) if busy else TRANSFER
    return OTHER if innermost == SERVER else innermost


def profile(spans: Sequence[Mapping[str, Any]]) -> Profile:
    """The run's wall time split into phases (see the module docstring)."""
    window_start, window_end = _window(spans)
    server_spans = [s for s in spans if s["name"] == SERVER]
    server_start = min((s["start"] for s in server_spans), default=window_end)
    server_end = max((s["end"] for s in server_spans), default=window_end)
    round_starts = _round_starts(spans)
    finish_start = min((s["start"] for s in spans if s["name"] == FINISH), default=server_end)
    inner = [s for s in spans if s["name"] != LAUNCH and window_start <= s["start"] < window_end]
    events = sorted(
        [(s["start"], 1, i) for i, s in enumerate(inner)]
        + [(s["end"], 0, i) for i, s in enumerate(inner)]
        + [(t, 2, -1) for t, _ in round_starts]
        + [(t, 2, -1) for t in (window_start, window_end, server_start, server_end, finish_start)]
    )
    result = Profile(wall_seconds=window_end - window_start)
    server_active: dict[int, Mapping[str, Any]] = {}
    clients: Counter = Counter()
    previous = window_start
    for time, kind, index in events:
        time = min(max(time, window_start), window_end)
        if time > previous:
            bounds = (server_start, server_end, finish_start)
            _credit(result, previous, time, server_active, clients, bounds, round_starts)
            previous = time
        if index < 0:
            continue
        s = inner[index]
        if s["name"] in CLIENT_SPANS:
            clients[s["name"]] += 1 if kind == 1 else -1
        elif kind == 1:
            server_active[index] = s
        else:
            server_active.pop(index, None)
    for s in inner:
        if s["name"] in CLIENT_SPANS:
            server_round = _round_of(s["start"], round_starts, finish_start)
            if server_round is not None:
                seconds = result.client_seconds.setdefault(server_round, defaultdict(float))
                seconds[_client_phase(s["name"])] += s["end"] - s["start"]
    result.client_seconds = {r: dict(phases) for r, phases in result.client_seconds.items()}
    return result


def _round_of(time: float, round_starts: list[tuple[float, int]], finish_start: float) -> int | None:
    current = None
    for start, server_round in round_starts:
        if time >= start:
            current = server_round
    return current if current is not None and time < finish_start else None


def _credit(
    result: Profile,
    start: float,
    end: float,
    server_active: dict[int, Mapping[str, Any]],
    clients: Counter,
    bounds: tuple[float, float, float],
    round_starts: list[tuple[float, int]],
) -> None:
    server_start, server_end, finish_start = bounds
    in_server = server_start <= start < server_end and bool(server_active)
    phase = _phase_at(list(server_active.values()), clients, in_server, start < server_start)
    server_round = _round_of(start, round_starts, finish_start)
    if server_round is not None:
        part = result.rounds.setdefault(server_round, {})
    elif round_starts and start >= round_starts[0][0]:
        part = result.end
    else:
        part = result.start
    part[phase] = part.get(phase, 0.0) + (end - start)
