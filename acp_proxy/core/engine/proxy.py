"""ProxyCore: the whole proxy as a pure function of frames, time and state.

docs/design.md section 2. Per message: classify (keeping ``raw``), track requests
in flight per direction, inspect (registry), decide (enforcement on
client->agent, hold and dedup on agent->client) and emit actions in order.

The engine is composed of parts, each owning its state: the
:class:`~acp_proxy.core.engine.ledger.Ledger` (outcomes, the
:class:`~acp_proxy.core.engine.counters.Counters`, and the
:class:`~acp_proxy.core.engine.inflight.InFlight` requests), the
:class:`~acp_proxy.core.engine.client.ClientDirection` (enforcement) and the
:class:`~acp_proxy.core.engine.agent.AgentDirection` (hold, registry, dedup),
sharing the session state (registry, hold buffer, dedup) and the gates through
one :class:`~acp_proxy.core.engine.context.EngineContext`.
:class:`ProxyCore` takes frames in, classifies them, forwards the ones no rule
needs to inspect on the fast path and hands the rest to a direction.

Accounting: every message accepted (a frame, or one element of a batch) ends
as exactly one of *forwarded*, *answered* by the proxy, *dropped* with an
audit record, or is still *held*; :meth:`ProxyCore.statistics` exposes the
counters, and ``accepted == forwarded + answered + dropped + held`` always.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer, Report, Send, StoreCall, StoreReply
from acp_proxy.core.engine.agent import AgentDirection
from acp_proxy.core.engine.client import ClientDirection
from acp_proxy.core.engine.context import EngineContext, EnginePart
from acp_proxy.core.engine.counters import CoreStatistics
from acp_proxy.core.engine.refusals import refuse, refuse_batch, refuse_oversize
from acp_proxy.core.wire import runs
from acp_proxy.core.wire.framing import Incoming, Lines, Oversize, Partial
from acp_proxy.core.wire.jsonrpc import (
    INTERNAL_ERROR,
    Kind,
    Message,
    canonical,
    error_frame,
    parse,
)
from acp_proxy.core.wire.jsonscan import request_id_from_prefix
from acp_proxy.core.wire.memo import LineMemo
from acp_proxy.core.wire.passthrough import (
    NEEDS,
    NEEDS_WITH_TOOLS,
    chunk_static,
    envelope_uninspected,
    run_sessions,
    uninspected,
)
from acp_proxy.core.wire.runs import CHUNK_KINDS, chunk_depth, chunk_run, envelope_lines, plain_run
from acp_proxy.core.wire.verdict import Verdict

__all__ = ["CoreStatistics", "ProxyCore"]

# Enum members as module globals (``Kind.X`` / ``Peer.X`` are slow attribute lookups).
_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_NOTIFICATION = Kind.NOTIFICATION
_BATCH = Kind.BATCH
_OK = Verdict.OK


class ProxyCore(EnginePart):
    """The sans-IO proxy engine for one client-agent connection.

    Args:
        config: the effective configuration (defaults when omitted).
        label: what its life-cycle lines (``info`` reports: initialize, sessions
            created, children announced, a peer gone) start with, e.g.
            ``"connection 1"``.

    Every public method returns a list of actions for the shell to carry out
    in order; none of them raises on anything a peer sends. The hot path
    (agent notifications forwarded unchanged) is here; client-side
    enforcement is in :mod:`~acp_proxy.core.engine.client`, hold, registry and
    dedup in :mod:`~acp_proxy.core.engine.agent`.

    Attributes:
        ctx: what the engine parts share (:mod:`~acp_proxy.core.engine.context`);
            the members below are its members.
        config: the effective configuration (``ctx.config``).
        registry: the subagent registry.
        hold: the hold buffer.
        dedup: the duplicate state report filter.
        ledger: outcomes, counters and requests in flight.
        negotiated: what ``initialize`` negotiated.
        permissions: the permission gate (the ``[permissions]`` policy, workspaces,
            ask timers); ``permissions.configure(config)`` swaps the policy.
        client: the client direction.
        agent: the agent direction.
        admission: the admission gate (``[admission]``; the shell binds the
            connection's principal with ``admission.bind``).
        elicitation: the elicitation gate (``[elicitation]``).
    """

    def __init__(self, config: Config | None = None, *, label: str = "") -> None:
        config = config or Config()
        limits = config.limits
        self._dense_bytes = limits.dense_message_bytes
        self._min_value_bytes = limits.min_bytes_per_value
        self._max_depth = limits.max_nesting_depth
        self._max_sid = limits.max_session_id_bytes
        ctx = EngineContext.open(config, label, self._reparse)
        super().__init__(ctx)  # the context's members, under the names the API has
        self.permissions = ctx.gate
        self._known = self.registry.known  # the same set, one attribute lookup less
        #: the agent stopped reading (:meth:`agent_stopped_reading`) but has not exited yet
        self.agent_deaf = False
        self._queued: deque[Incoming] = deque()  # client items behind a prompt at the store
        self._chunk_depth = chunk_depth(self._max_depth)
        self._set_needs()
        self._inspected = LineMemo(self._reparse).parse  # inspected lines of runs (repeats)
        self.agent = AgentDirection(ctx)
        self.client = ClientDirection(ctx, self.agent)

    @property
    def config(self) -> Config:
        """The effective configuration (the context's; :meth:`reconfigure` swaps it)."""
        return self.ctx.config

    def _needs_table(self) -> dict[str, str | None]:
        """The fast path's table of updates to inspect: the permission gate's, plus
        ``tool_call`` / ``usage_update`` while a budget counts them (only then)."""
        needs = NEEDS_WITH_TOOLS if self.permissions.remembers_tools else NEEDS
        b = self.budgets
        if b.watches_tools or b.watches_usage:
            needs = dict(needs)
            if b.watches_tools:
                needs["tool_call"] = None
            if b.watches_usage:
                needs["usage_update"] = None
        return needs

    def _set_needs(self) -> None:
        needs = self._needs_table()
        self._needs = needs
        # the compiled scanner passes a chunk line on its session alone: only while no
        # content-chunk kind is inspected (no table above lists one)
        self._stretch = runs.fast_stretch if CHUNK_KINDS.isdisjoint(needs) else None

    def reconfigure(self, config: Config) -> None:
        """Applies the policy sections of ``config`` to this live connection (a reload).

        The policy sections (:data:`acp_proxy.config.reload.POLICY_SECTIONS`):
        ``enforcement``, ``hold``, ``dedup``, ``audit.include_content``,
        ``permissions``, ``admission`` and ``elicitation``. Every part that read
        one of them at construction is given the new value here, in one
        synchronous call, so the next message
        is decided wholly under the new policy: a narrowed
        ``child_mutations`` refuses the next mutation on a child registered
        before, a shorter ``hold.timeout_seconds`` applies to sessions held
        now (the caller re-reads :meth:`get_timer`). Other sections keep the
        values the connection started with (``limits`` are bound into open
        buffers); :func:`acp_proxy.config.reload.apply_reload` gives a
        ``config`` whose other sections are unchanged.

        The context swaps the configuration once
        (:meth:`~acp_proxy.core.engine.context.EngineContext.reconfigure`) and
        hands it to every part built from it: **a new policy part** derives
        its values in a ``configure(config)`` method and registers with
        ``ctx.follow(self)`` when built, or a reload would leave it deciding
        on the old policy.

        Args:
            config: the effective configuration after the reload.
        """
        self.ctx.reconfigure(config)
        self._set_needs()

    @property
    def protocol_version(self) -> int | None:
        """The protocol version ``initialize`` negotiated, or ``None``."""
        return self.negotiated.protocol_version

    @property
    def client_subagents(self) -> bool:
        """Protocol v1: whether the client advertised ``clientCapabilities.subagents``."""
        return self.negotiated.client_subagents

    def _reparse(self, raw: bytes) -> Message:
        """:func:`~acp_proxy.core.wire.jsonrpc.parse` with this connection's limits."""
        return parse(raw, self._dense_bytes, self._min_value_bytes, self._max_depth, self._max_sid)

    # ----------------------------------------------------------------- API

    def receive(
        self, source: Peer, incoming: Incoming | Sequence[Incoming], now: float
    ) -> list[Action]:
        """Handles what the framer read from ``source``: one item, or a list of them in order.

        The one input method, shared by every topology. Items are what
        :class:`~acp_proxy.core.wire.framing.LineFramer` gives (or a
        message-framed transport): a frame (``bytes``, without its line
        ending), a :class:`~acp_proxy.core.wire.framing.Lines` run of complete
        lines, an :class:`~acp_proxy.core.wire.framing.Oversize` or a
        :class:`~acp_proxy.core.wire.framing.Partial` report.

        Agent notifications that need no inspection (a session the client
        knows, not a subagent, state or inter-session update:
        :mod:`~acp_proxy.core.wire.passthrough`) are forwarded without building a
        :class:`~acp_proxy.core.wire.jsonrpc.Message`. An agent run is decoded in
        one call when every line is a ``session/update``-shaped envelope
        (:func:`~acp_proxy.core.wire.runs.envelope_run`, content left undecoded)
        or else canonical JSON (:func:`~acp_proxy.core.wire.runs.plain_run`);
        each stretch of unremarkable notifications in it is then forwarded as
        one :class:`~acp_proxy.core.actions.Send` of the original bytes, its
        messages joined by ``b"\\n"``. Everything else is handled message by
        message, in order; the verdicts are the same on every path.

        Args:
            source: the peer that sent it.
            incoming: an item or a list of items, in the order read.
            now: the current time, seconds (any monotonic clock).

        Returns:
            Actions to carry out in order.
        """
        b = self.budgets
        # in order while a prompt waits, too: a reload may have stopped watching prompts
        if source is _CLIENT and ((b.store and b.watches_prompts) or b.waiting is not None):
            return self._client_in_order(incoming, now)
        return self._receive(source, incoming, now)

    def _client_in_order(self, incoming: Incoming | Sequence[Incoming], now: float) -> list[Action]:
        """Client items one at a time, queued while a prompt waits for the budget store
        (:meth:`store_result` goes on with them), so the client's order is kept."""
        queue = self._queued
        if type(incoming) is list:
            items: Sequence[Incoming] = incoming
        else:
            items = [incoming]  # type: ignore[list-item]
        for item in items:
            if type(item) is Lines:
                queue.extend(item.frames())
            else:
                queue.append(item)
        return self._drain(now)

    def _drain(self, now: float) -> list[Action]:
        out: list[Action] = []
        queue = self._queued
        while queue and self.budgets.waiting is None:
            out.extend(self._receive(_CLIENT, queue.popleft(), now))
        return out

    def store_result(self, call: StoreCall, reply: StoreReply, now: float) -> list[Action]:
        """The budget store answered ``call`` (a :class:`~acp_proxy.core.actions.StoreCall`
        the core asked for): the waiting prompt is forwarded or answered, then the
        client's messages queued behind it are handled, in order.

        Args:
            call: the call, as the core gave it.
            reply: what the store said (``ok=False`` when it could not be reached).
            now: current time, seconds.
        """
        out: list[Action] = []
        m = self.budgets.store_result(call, reply, now, out)
        if m is not None:  # enforcement again: the registry may have changed meanwhile
            self.client.handle(m, now, out, budgeted=True)
        if self._queued and self.budgets.waiting is None:
            out.extend(self._drain(now))
        return out

    def _receive(
        self, source: Peer, incoming: Incoming | Sequence[Incoming], now: float
    ) -> list[Action]:
        if type(incoming) is bytes:
            return self._frame(source, incoming, now)
        items: Sequence[Incoming] = incoming if type(incoming) is list else [incoming]  # type: ignore[list-item]
        out: list[Action] = []
        run: list[bytes] = []  # consecutive frames go together
        for item in items:
            if type(item) is bytes:
                run.append(item)
                continue
            if run:
                out.extend(self._frames(source, run, now))
                run = []
            if type(item) is Lines:
                lines = self._run(item.data, now) if source is _AGENT else None
                out.extend(self._frames(source, item.frames(), now) if lines is None else lines)
            elif type(item) is Oversize:
                rid = request_id_from_prefix(item.prefix, any_type=source is _AGENT)
                out.extend(self._oversize(source, item.size_bytes, item.complete, rid))
            elif type(item) is Partial:
                out.extend(self._partial(source, item.size_bytes))
        if run:
            out.extend(self._frames(source, run, now))
        return out

    # Nesting: every decoder path refuses a frame nested deeper than
    # limits.max_nesting_depth (parse, canonical, envelope_run, plain_run: the
    # decoded value walked, a decoder out of stack, or the bytes scanned), so a
    # verdict never depends on how deep the call stack is; the limit (at most
    # 512) leaves the decoders room at any stack depth the shell calls from.

    def _frame(self, source: Peer, raw: bytes, now: float) -> list[Action]:
        return self._message(source, self._reparse(raw), now)

    def _frames(self, source: Peer, frames: list[bytes], now: float) -> list[Action]:
        out: list[Action] = []
        if source is not _AGENT:
            for raw in frames:
                out.extend(
                    self._message(
                        source,
                        self._reparse(raw),
                        now,
                    )
                )
            return out
        known = self._known
        dense = self._dense_bytes
        depth = self._max_depth
        needs = self._needs
        for raw in frames:
            if uninspected(canonical(raw, dense, depth), known, needs):
                out.extend(self._forward_fast(raw))
            else:
                out.extend(
                    self._message(
                        source,
                        self._reparse(raw),
                        now,
                    )
                )
        return out

    def _run(self, data: bytes, now: float) -> list[Action] | None:
        """An agent run: its content-chunk lines read on the bytes by the compiled
        scanner (:data:`~acp_proxy.core.wire.runs.fast_stretch`), when built;
        else :meth:`_run_decoded`.

        Each stretch of chunk lines of known sessions is forwarded as one write
        of its bytes, checked against the sessions known when it comes; the
        lines between two stretches are a run of their own, decided by
        :meth:`_run_decoded` (or frame by frame, when it cannot), exactly as
        before. A line the scanner passes is one
        :func:`~acp_proxy.core.wire.runs.chunk_run` passes, of a known session
        (the scanner's contract, held by ``tests/core/wire/test_chunkscan.py``),
        so every line is decided as on the pure-Python path.
        """
        stretch = self._stretch
        if stretch is None:
            return self._run_decoded(data, now)
        known = self._known
        depth = self._chunk_depth
        count, stop, after = stretch(data, 0, known, depth)
        size = len(data)
        if stop > size:
            return self._forward_fast(data, count)
        out: list[Action] = []
        pos = 0
        while True:
            if count:
                out.extend(self._forward_fast(data[pos : stop - 1], count))
            if stop > size:
                return out
            rest = data[stop : after - 1]  # the lines up to the next stretch
            lines = self._run_decoded(rest, now)
            out.extend(self._frames(_AGENT, Lines(rest).frames(), now) if lines is None else lines)
            if after > size:
                return out
            pos = after
            count, stop, after = stretch(data, pos, known, depth)

    def _run_decoded(self, data: bytes, now: float) -> list[Action] | None:
        """An agent run decoded at once, or ``None`` when it cannot be (one item per line).

        A run of content chunks is judged in bulk except for the sessions
        (:func:`~acp_proxy.core.wire.passthrough.chunk_static`); every line is
        decided against the sessions known when its turn comes, as alone (an
        inspected message before it may make the registry learn or forget one).
        """
        known = self._known
        needs = self._needs
        sids: list[str] | None = None
        static: list[bool] | None = None
        check: Callable[[Any, Collection[str], dict[str, str | None]], bool] = envelope_uninspected
        items: list[Any] | None = chunk_run(data, self._max_depth)
        if items is not None:
            static = chunk_static(items, needs)
            sids = run_sessions(items)
            if static is None and known.issuperset(sids):
                return self._forward_fast(data, len(items))
            lines: list[bytes] | None = None  # each line's bytes, when the decoder gave them
        elif (found := envelope_lines(data, self._max_depth)) is not None:
            items, lines = found
        else:
            items = plain_run(data, self._max_depth)
            check = uninspected
            lines = None
            if items is None:
                return None
        count = len(items)
        out: list[Action] = []
        # Line j of the run is item j: the decoders proved every line one item,
        # with no newline inside one (the run re-encodes to its bytes). An
        # envelope run gives each line's bytes (its envelope re-encoded); else
        # line j starts after the j-th newline, found as the inspected lines
        # come (issue 29: the run is never split whole).
        start = 0  # first line of the current stretch of plain notifications
        seg = 0  # its byte offset
        at = 0  # a line whose byte offset is known: pos
        pos = 0
        find = data.find
        for j, item in enumerate(items):
            if sids is None:
                if check(item, known, needs):
                    continue
            elif (static is None or static[j]) and sids[j] in known:
                continue
            if lines is not None:
                line = lines[j]
                if start < j:
                    out.extend(self._forward_fast(b"\n".join(lines[start:j]), j - start))
            else:
                while at < j:
                    pos = find(b"\n", pos) + 1
                    at += 1
                end = find(b"\n", pos)
                if end < 0:
                    end = len(data)
                if start < j:
                    out.extend(self._forward_fast(data[seg : pos - 1], j - start))
                line = data[pos:end]
                at = j + 1
                seg = pos = end + 1
            # a repeated line: its first parse; not the fast path (the run's check said so)
            out.extend(self._inspect(self._inspected(line), now))
            start = j + 1
        if start == 0:
            return self._forward_fast(data, count)
        if start < count:
            rest = data[seg:] if lines is None else b"\n".join(lines[start:])
            out.extend(self._forward_fast(rest, count - start))
        return out

    def _message(self, source: Peer, m: Message, now: float) -> list[Action]:
        """One parsed frame (a message, or a batch of them) from ``source``."""
        out: list[Action] = []
        if m.kind is _NOTIFICATION and source is _AGENT and m.verdict is _OK:
            if uninspected(m.body, self._known, self._needs):
                return self._forward_fast(m.raw)
            if self.agent.repeated_report(m, out):  # a repeated state report, dropped
                return out
        if m.kind is _BATCH:
            self._batch(source, m, out)
        else:
            self._dispatch(source, m, now, out)
        return out

    def _inspect(self, m: Message, now: float) -> list[Action]:
        """:meth:`_message` of an agent line of a run that the run's check
        (:func:`~acp_proxy.core.wire.passthrough.envelope_uninspected` or
        :func:`~acp_proxy.core.wire.passthrough.uninspected` of the same line)
        did not pass: its own test of the fast path is not made again. A line of
        a run is one JSON object (never a batch). Exact even if the two tests
        disagreed: the fast path forwards only what the engine forwards
        unchanged, and counts it the same."""
        out: list[Action] = []
        if m.kind is _NOTIFICATION and m.verdict is _OK and self.agent.repeated_report(m, out):
            return out  # a repeated state report, dropped
        self._dispatch(_AGENT, m, now, out)
        return out

    def _batch(self, source: Peer, m: Message, out: list[Action]) -> None:
        """Refuses a JSON-RPC batch whole (:func:`~acp_proxy.core.engine.refusals.refuse_batch`)."""
        refuse_batch(self.ledger, source, m, out)

    def _forward_fast(self, data: bytes, count: int = 1) -> list[Action]:
        """Forwards ``count`` agent messages (joined by newlines in ``data``) unchanged."""
        n = self.n
        n.accepted += count
        n.forwarded += count
        return [Send(_CLIENT, data)]

    def _oversize(self, source: Peer, size_bytes: int, complete: bool, rid: Any) -> list[Action]:
        """Reports a message skipped by the framer for exceeding ``max_message_bytes``
        (:func:`~acp_proxy.core.engine.refusals.refuse_oversize`)."""
        limit = self.config.limits.max_message_bytes
        pending = self.inflight.pending[_CLIENT]
        return refuse_oversize(self.ledger, pending, source, size_bytes, limit, complete, rid)

    def _partial(self, source: Peer, size_bytes: int) -> list[Action]:
        """Reports a half-written last line at end of stream (never forwarded)."""
        out: list[Action] = []
        self.n.accepted += 1
        self.n.dropped += 1
        self.n.invalid += 1
        reason = f"half-written last line at end of stream ({size_bytes} bytes)"
        self.ledger.audit(out, AuditEvent.INVALID_MESSAGE, source, reason=reason)
        out.append(Report("warning", f"{source.value}: {reason}, not forwarded"))
        return out

    def peer_closed(self, peer: Peer, now: float, detail: str = "") -> list[Action]:
        """The peer's stream ended (the agent exited, or the client went away).

        Requests still in flight toward ``peer`` are answered with
        ``-32603`` errors naming ``detail``, so the other side never hangs.
        When the agent closes, held traffic is released or dropped per
        ``hold.on_expire``.

        Args:
            peer: the side that closed.
            now: current time, seconds.
            detail: e.g. ``"agent exited with status 1"``; goes in error messages.
        """
        out: list[Action] = []
        gone = self.inflight.gone
        if gone[peer] is not None:
            if peer is _AGENT and self.agent_deaf:  # it stopped reading before; now it exited
                self.agent_deaf = False
                for ev in self.hold.evict_all("agent_exited"):
                    self.agent.expire(ev, now, out)
            return out
        text = detail or f"{peer.value} closed the connection"
        gone[peer] = text
        self.ledger.audit(out, AuditEvent.PEER_CLOSED, peer, reason=text)
        self.ledger.info(
            out, "side ended", f"the {peer.value}'s side ended" + (f": {detail}" if detail else "")
        )
        if peer is _AGENT:
            self.permissions.agent_gone()
            for ev in self.hold.evict_all("agent_exited"):
                self.agent.expire(ev, now, out)
        else:
            self.permissions.client_gone()
            stalled = self.budgets.waiting
            if stalled is not None:  # nobody is left to answer: the prompt goes no further
                self.budgets.waiting = None
                self._queued.clear()  # not yet accepted
                self.ledger.drop(
                    out,
                    stalled[1],
                    _CLIENT,
                    AuditEvent.REQUEST_DROPPED,
                    "the client went while it waited for the budget store",
                )
        self._answer_waiting(peer.other, text, out)
        return out

    def agent_stopped_reading(self, now: float, detail: str) -> list[Action]:
        """A write to the agent failed: it closed its input, but it may still be running.

        The agent is treated as gone *for requests*: the client's requests in
        flight toward it, and every later one, are answered ``-32603`` naming
        ``detail`` (audited ``peer_closed``); its own output keeps flowing to
        the client until it exits (:meth:`peer_closed` then releases the hold
        buffer). Idempotent.

        Args:
            now: current time, seconds.
            detail: why, e.g. ``"agent stopped reading its input (stdin closed)"``.
        """
        out: list[Action] = []
        if self.inflight.gone[_AGENT] is not None:
            return out
        self.inflight.gone[_AGENT] = detail
        self.agent_deaf = True
        self.ledger.audit(out, AuditEvent.PEER_CLOSED, _AGENT, reason=detail)
        self.ledger.info(out, "side ended", f"the agent's input ended: {detail}")
        self.permissions.agent_gone()
        self._answer_waiting(Peer.CLIENT, detail, out)
        return out

    def _answer_waiting(self, waiting: Peer, text: str, out: list[Action]) -> None:
        """Answers ``-32603`` every request of ``waiting`` in flight toward a peer gone."""
        expired = self.permissions.expired if waiting is _AGENT else {}
        for rid, (method, sid, _cost) in self.inflight.take_all(waiting):
            if expired.pop(rid, None) is not None:
                continue  # the proxy already answered it cancelled
            out.append(
                Send(
                    waiting,
                    error_frame(
                        rid,
                        INTERNAL_ERROR,
                        f"acp-proxy: {text}; {method} got no answer",
                        {"method": method, "sessionId": sid, "reason": text},
                    ),
                )
            )

    def pending_ids(self, requester: Peer) -> Collection[Any]:
        """The ids of ``requester``'s requests still in flight (a read-only view)."""
        return self.inflight.ids(requester)

    def pending_requests(self, requester: Peer) -> int:
        """Requests sent by ``requester`` still waiting for an answer."""
        return self.inflight.count(requester)

    def get_timer(self) -> float | None:
        """When :meth:`handle_timer` must next be called (seconds), or ``None``: the
        earlier of the hold buffer's next expiry and the next permission ask timeout."""
        hold = self.hold.next_deadline()
        ask = self.permissions.next_deadline()
        if ask is not None and (hold is None or ask < hold):
            hold = ask
        turn = self.budgets.next_deadline() if self.budgets.watches_turns else None
        if turn is None:
            return hold
        return turn if hold is None or turn < hold else hold

    def handle_timer(self, now: float) -> list[Action]:
        """Expires held sessions whose ``hold.timeout_seconds`` has passed, and answers
        ``cancelled`` to the agent for forwarded permission requests whose
        ``ask_timeout_seconds`` has passed."""
        out: list[Action] = []
        for ev in self.hold.expire(now):
            self.agent.expire(ev, now, out)
        self.permissions.expire(now, out)
        if self.budgets.watches_turns:
            self.budgets.expire(now, out)
        return out

    def statistics(self) -> CoreStatistics:
        """A snapshot of the counters (see :class:`CoreStatistics`)."""
        return CoreStatistics(
            held=self.hold.total_messages + (self.budgets.waiting is not None),
            held_bytes=self.hold.total_bytes,
            pending_client_requests=self.inflight.count(_CLIENT),
            pending_agent_requests=self.inflight.count(_AGENT),
            children=len(self.registry.children),
            protocol_version=self.negotiated.protocol_version,
            **attrs.asdict(self.n),
        )

    # ------------------------------------------------------------ dispatch

    def _dispatch(self, source: Peer, m: Message, now: float, out: list[Action]) -> None:
        """One message: refused by its verdict's row of
        :data:`~acp_proxy.core.engine.refusals.REFUSALS`, else decided by a direction."""
        self.n.accepted += 1
        if m.verdict is not _OK:
            refuse(self.ledger, self.agent, source, m, out)
        elif source is _CLIENT:
            self.client.handle(m, now, out)
        else:
            self.agent.handle(m, now, out)
