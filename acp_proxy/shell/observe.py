"""Who watches the traffic: the trace file, the metrics, other observers.

The topologies build each connection's core with :func:`make_core`. When nothing
observes (no trace, no metrics, no other observer) it is a plain
:class:`~acp_proxy.core.engine.ProxyCore`: the hot path is not touched. The
life-cycle log at ``info`` (initialize with the negotiated version and both
peers' names, each session created, each child announced with its grants,
each peer's end) needs no observer: the plain core reports those few events
itself (``Report("info", ...)``, logged by :func:`~acp_proxy.shell.routing.route_actions`);
agent start and exit are logged by the process transport. Every core is
labelled ``connection N`` for those lines.

When something observes, the core is a :class:`~acp_proxy.core.trace.TracingCore`
whose records go to the :class:`Hub`, which hands each one to every observer:

- the :class:`~acp_proxy.shell.trace.TraceWriter` (``--trace``);
- the :class:`Tally` of counters and request durations (``--metrics``, ``/status``);
- any other :class:`RecordObserver` (the OpenTelemetry bridge, ``--otel``).

Records may come from a worker thread (a large message): the tally and the
writer take a lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from acp_proxy.config import Config
from acp_proxy.config.records import Described
from acp_proxy.core.engine import ProxyCore

if TYPE_CHECKING:  # imported when something observes (issue 29: start-up)
    from acp_proxy.core.trace import Record
    from acp_proxy.shell.trace import TraceWriter

__all__ = [
    "DURATION_BUCKETS",
    "Connection",
    "Hub",
    "RecordObserver",
    "Tally",
    "current",
    "install",
    "make_core",
]

#: upper bounds (seconds) of the request duration histogram's buckets
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: closed connections kept for ``/status`` (the newest)
KEEP_CLOSED = 16


class RecordObserver(Protocol):
    """Something else that sees every record (e.g. the OpenTelemetry bridge)."""

    def observe(self, conn: Connection, record: Record) -> None:
        """One record of ``conn`` (from the core's thread: must not block)."""

    def shutdown(self) -> None:
        """The proxy stops (bounded in time)."""


class Tally:
    """Counters over every connection: messages, decisions, request durations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages: dict[tuple[str, str], int] = {}
        from acp_proxy.core.trace import DECISIONS

        self.decisions: dict[str, int] = dict.fromkeys(DECISIONS, 0)
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)
        self.duration_sum = 0.0
        self.duration_count = 0

    def observe(self, record: Record) -> None:
        """Counts one record."""
        if record.get("type") != "message":
            return
        with self._lock:
            if record.get("seq") is not None:
                key = (record["dir"], record["kind"])
                self.messages[key] = self.messages.get(key, 0) + 1
            decision = record["decision"]
            self.decisions[decision] = self.decisions.get(decision, 0) + 1
            duration = record.get("duration")
            if duration is not None:
                i = 0
                while i < len(DURATION_BUCKETS) and duration > DURATION_BUCKETS[i]:
                    i += 1
                self.buckets[i] += 1
                self.duration_sum += duration
                self.duration_count += 1

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the counters."""
        with self._lock:
            return {
                "messages": dict(self.messages),
                "decisions": dict(self.decisions),
                "buckets": list(self.buckets),
                "duration_sum": self.duration_sum,
                "duration_count": self.duration_count,
            }


@attrs.define(eq=False, repr=False)
class Connection(Described):
    """One client-agent connection as the observers see it.

    Attributes:
        number: 1, 2, ... in order of creation (``conn`` in the trace).
        core: its core.
        agent_pid: the agent process's pid, when the proxy started it.
        started: wall-clock start (seconds since the epoch).
        closed: the peer that ended first, once one did.
    """

    number: int
    core: ProxyCore
    agent_pid: int | None
    started: float
    closed: str | None = None

    @property
    def principal(self) -> str | None:
        """The principal bound to the connection (``--tokens-file``), if any."""
        return self.core.admission.principal

    @property
    def client_name(self) -> str | None:
        """``clientInfo.name`` (v2: ``info.name``) from ``initialize``, when given."""
        return self.core.negotiated.client_name

    @property
    def agent_name(self) -> str | None:
        """``agentInfo.name`` (v2: ``info.name``) from ``initialize``, when given."""
        return self.core.negotiated.agent_name


class Hub:
    """Fans each connection's records out to the observers.

    Args:
        trace: the trace writer, or ``None``.
        tally: counters for ``/metrics`` and ``/status``, or ``None``.
        others: more observers.
    """

    def __init__(
        self,
        *,
        trace: TraceWriter | None = None,
        tally: Tally | None = None,
        others: list[RecordObserver] | None = None,
    ) -> None:
        self.trace = trace
        self.tally = tally
        self.others = others or []
        self.started = time.time()
        self.started_monotonic = time.monotonic()
        self.connections: dict[int, Connection] = {}
        #: the audit log (an :class:`~acp_proxy.shell.audit.AuditLog`), for its counters
        self.audit: Any = None
        self._count = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """True when anything observes the traffic."""
        return bool(self.trace or self.tally or self.others)

    def make_core(self, config: Config, agent_pid: int | None = None) -> ProxyCore:
        """A core for a new connection, observed when anything observes."""
        if not self.active:
            return ProxyCore(config, label=_plain_label())
        with self._lock:
            self._count += 1
            number = self._count
        holder: list[Connection] = []

        def emit(record: Record) -> None:
            self.observe(holder[0], record)

        from acp_proxy.core.trace import TracingCore

        core = TracingCore(
            config,
            emit=emit,
            include_content=bool(self.trace and self.trace.include_content),
            label=f"connection {number}",
        )
        conn = Connection(number, core, agent_pid, time.time())
        holder.append(conn)
        with self._lock:
            self.connections[number] = conn
            closed = [n for n, c in self.connections.items() if c.closed is not None]
            for n in closed[:-KEEP_CLOSED]:
                del self.connections[n]
        return core

    def close(self) -> None:
        """The proxy stops: the other observers shut down, the trace is closed."""
        for other in self.others:
            other.shutdown()
        if self.trace is not None:
            self.trace.close()

    def totals(self) -> dict[str, int]:
        """Over the live connections: ``held`` messages, ``held_bytes``, ``children``,
        ``connections``."""
        held = held_bytes = children = 0
        live = self.live()
        for conn in live:
            s = conn.core.statistics()
            held += s.held
            held_bytes += s.held_bytes
            children += s.children
        return {
            "held": held,
            "held_bytes": held_bytes,
            "children": children,
            "connections": len(live),
        }

    def live(self) -> list[Connection]:
        """Connections whose peers have not both gone, oldest first."""
        with self._lock:
            return [c for c in self.connections.values() if c.closed is None]

    def observe(self, conn: Connection, record: Record) -> None:
        """Hands one record to every observer."""
        if self.trace is not None:
            copy = dict(record)
            if conn.principal is not None:
                copy["principal"] = conn.principal
            self.trace.write(conn.number, copy)
        if self.tally is not None:
            self.tally.observe(record)
        if record.get("type") == "closed" and conn.closed is None:
            conn.closed = record["peer"]
        for other in self.others:
            other.observe(conn, record)


_PLAIN = itertools.count(1)


def _plain_label() -> str:
    """``connection N`` for a core nobody observes (numbered apart from a hub's)."""
    return f"connection {next(_PLAIN)}"


_HUB: Hub | None = None


def install(hub: Hub | None) -> None:
    """Makes ``hub`` the one :func:`make_core` uses (``None``: observe nothing)."""
    global _HUB
    _HUB = hub


def current() -> Hub | None:
    """The installed hub, if any."""
    return _HUB


def make_core(config: Config, agent_pid: int | None = None) -> ProxyCore:
    """The core for a new connection: observed by the installed hub, or plain."""
    hub = _HUB
    if hub is None:
        return ProxyCore(config, label=_plain_label())
    return hub.make_core(config, agent_pid)
