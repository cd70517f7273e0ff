"""ProxyCore: the whole proxy as a pure function of frames, time and state.

DESIGN.md section 2. Per message: classify (keeping ``raw``), track requests
in flight per direction, inspect (registry), decide (enforcement on
client->agent, hold and dedup on agent->client) and emit actions in order.

Accounting: every message accepted (a frame, or one element of a batch) ends
as exactly one of *forwarded*, *answered* by the proxy, *dropped* with an
audit record, or is still *held*; :meth:`ProxyCore.statistics` exposes the
counters, and ``accepted == forwarded + answered + dropped + held`` always.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, Audit, Peer, Report, Send
from acp_proxy.core.dedup import StateDedup
from acp_proxy.core.framing import Lines
from acp_proxy.core.hold import Evicted, HoldBuffer
from acp_proxy.core.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    SNAKE_PARAMS_KEY,
    SNAKE_UPDATE_KEYS,
    Kind,
    Message,
    canonical,
    dumps,
    error_frame,
    exact_body,
    parse,
)
from acp_proxy.core.patch import UNSET
from acp_proxy.core.policy import check_mutation
from acp_proxy.core.registry import Registry, UpdateOutcome
from acp_proxy.core.runs import Envelope, envelope_run, plain_run, update_kind
from acp_proxy.core.schema import PATCH_FIELDS, view_subagent_update

__all__ = ["CoreStatistics", "ProxyCore"]

# Enum members as module globals: ``Kind.X`` / ``Peer.X`` are slow attribute lookups.
_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE
_ERROR_RESPONSE = Kind.ERROR_RESPONSE
_BATCH = Kind.BATCH
_INVALID = Kind.INVALID
# sessionUpdate values that need more than forwarding (see _unknown_session, _deliver).
_INSPECTED_UPDATES = frozenset({"session_message", "subagent_update", "state_update"})
_NOT_IN_NOTIFICATIONS = frozenset({"id", "result", "error"})

_OPENS_SESSION = frozenset({"session/load", "session/resume"})
_CREATES_SESSION = frozenset({"session/new", "session/fork"})
_SUBAGENT_KEYS = frozenset({"sessionUpdate", "sessionId", *PATCH_FIELDS})
_MISSING: Any = object()


@attrs.frozen
class CoreStatistics:
    """Counters of one :class:`ProxyCore` (all message counts include batch elements).

    Attributes:
        accepted: messages taken in from either peer.
        forwarded: messages delivered to the other peer (rewrites included).
        answered: messages the proxy answered itself instead of forwarding.
        dropped: messages dropped with an audit record.
        held: messages currently in the hold buffer.
        held_bytes: bytes currently in the hold buffer.
        rejected_mutations: client mutations on children refused.
        duplicates_removed: state reports dropped or rewritten as duplicates.
        invalid: frames that were not valid JSON-RPC (either side).
        non_json_agent_lines: agent stdout lines that were not JSON.
        malformed_errors: error responses without an integer code / string message.
        oversize: messages skipped for exceeding ``max_message_bytes``.
        pending_client_requests: client requests in flight toward the agent.
        pending_agent_requests: agent requests in flight toward the client.
        children: child sessions in the registry.
        protocol_version: negotiated by ``initialize``, or ``None``.
    """

    accepted: int
    forwarded: int
    answered: int
    dropped: int
    held: int
    held_bytes: int
    rejected_mutations: int
    duplicates_removed: int
    invalid: int
    non_json_agent_lines: int
    malformed_errors: int
    oversize: int
    pending_client_requests: int
    pending_agent_requests: int
    children: int
    protocol_version: int | None


class ProxyCore:
    """The sans-IO proxy engine for one client-agent connection.

    Args:
        config: the effective configuration (defaults when omitted).

    Every public method returns a list of actions for the shell to carry out
    in order; none of them raises on anything a peer sends.
    """

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.registry = Registry(self.config.limits.max_children)
        self._known = self.registry.known  # the same set, one attribute lookup less
        self.hold = HoldBuffer(self.config.hold)
        self.dedup = StateDedup()
        self._mutations = self.config.enforcement.child_mutations
        self._dedup_on = self.config.dedup.state_reports
        self._max_pending = self.config.limits.max_pending_requests
        # requester -> {id: (method, sessionId)} of requests in flight
        self._pending: dict[Peer, dict[Any, tuple[str, Any]]] = {_CLIENT: {}, _AGENT: {}}
        self._closed: dict[Peer, str | None] = {_CLIENT: None, _AGENT: None}
        self.protocol_version: int | None = None
        self._n = {
            "accepted": 0,
            "forwarded": 0,
            "answered": 0,
            "dropped": 0,
            "rejected_mutations": 0,
            "duplicates_removed": 0,
            "invalid": 0,
            "non_json_agent_lines": 0,
            "malformed_errors": 0,
            "oversize": 0,
        }

    # ----------------------------------------------------------------- API

    def receive(self, source: Peer, raw: bytes, now: float) -> list[Action]:
        """Handles one frame from ``source``.

        Args:
            source: the peer that sent it.
            raw: the frame, without its line ending.
            now: the current time, seconds (any monotonic clock).

        Returns:
            Actions to carry out in order.
        """
        m = parse(raw)
        if (
            m.kind is _NOTIFICATION
            and source is _AGENT
            and not m.ambiguous
            and self._uninspected(m.body)
        ):
            return self._forward_fast(m.raw)
        out: list[Action] = []
        if m.kind is _BATCH:
            for item in m.items:
                self._dispatch(source, item, now, out)
        else:
            self._dispatch(source, m, now, out)
        return out

    def receive_frames(self, source: Peer, frames: list[bytes], now: float) -> list[Action]:
        """Handles several frames from ``source``, in order (same as :meth:`receive` each).

        Agent notifications that need no inspection (a session the client
        knows, not a subagent, state or inter-session update) are forwarded
        without building a :class:`~acp_proxy.core.jsonrpc.Message`.

        Args:
            source: the peer that sent them.
            frames: the frames, without line endings.
            now: the current time, seconds.

        Returns:
            Actions to carry out in order.
        """
        out: list[Action] = []
        if source is not _AGENT:
            for raw in frames:
                out.extend(self.receive(source, raw, now))
            return out
        uninspected = self._uninspected
        for raw in frames:
            if uninspected(canonical(raw)):
                out.extend(self._forward_fast(raw))
            else:
                out.extend(self.receive(source, raw, now))
        return out

    def receive_lines(self, source: Peer, lines: Lines, now: float) -> list[Action]:
        """Handles a run of complete lines from ``source`` (same as :meth:`receive_frames`).

        An agent run is decoded in one call when every line is a
        ``session/update``-shaped envelope (:func:`~acp_proxy.core.runs.envelope_run`,
        content left undecoded) or else canonical JSON
        (:func:`~acp_proxy.core.runs.plain_run`); each stretch of unremarkable
        notifications in it is then forwarded as one
        :class:`~acp_proxy.core.actions.Send` of the original bytes, its
        messages joined by ``b"\\n"``, and any other line goes through
        :meth:`receive`, in order. Otherwise the lines are split and handled
        one by one.

        Args:
            source: the peer that sent them.
            lines: the run, as :meth:`~acp_proxy.core.framing.LineFramer.feed_runs` gives it.
            now: the current time, seconds.

        Returns:
            Actions to carry out in order.
        """
        data = lines.data
        if source is _AGENT:
            envelopes = envelope_run(data)
            if envelopes is not None:
                return self._run(data, envelopes, self._envelope_uninspected, now)
            bodies = plain_run(data)
            if bodies is not None:
                return self._run(data, bodies, self._uninspected, now)
        return self.receive_frames(source, lines.frames(), now)

    def _run(
        self, data: bytes, items: list[Any], uninspected: Callable[[Any], bool], now: float
    ) -> list[Action]:
        """An agent run, one decoded item per line: plain stretches whole, the rest one by one."""
        out: list[Action] = []
        frames: list[bytes] = []
        start = 0  # first frame of the current stretch of plain notifications
        for j, item in enumerate(items):
            if uninspected(item):
                continue
            if not frames:
                frames = data.split(b"\n")  # one line per item
            if start < j:
                out.extend(self._forward_fast(b"\n".join(frames[start:j]), j - start))
            out.extend(self.receive(_AGENT, frames[j], now))
            start = j + 1
        if not frames:
            return self._forward_fast(data, len(items))
        if start < len(frames):
            out.extend(self._forward_fast(b"\n".join(frames[start:]), len(frames) - start))
        return out

    def _envelope_uninspected(self, env: Envelope) -> bool:
        """:meth:`_uninspected` for an :class:`~acp_proxy.core.runs.Envelope`.

        The envelope's type already rules out ``id`` / ``result`` / ``error``
        and a snake_case ``session_id`` in ``params`` (unknown keys refused).
        """
        if env.jsonrpc != "2.0":
            return False
        params = env.params
        if params.sessionId not in self._known:
            return False
        upd = params.update
        if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
            return False
        if env.method != "session/update":
            return True
        su = upd.get("sessionUpdate")
        return su is None or update_kind(su) not in _INSPECTED_UPDATES

    def _uninspected(self, body: Any) -> bool:
        """True for an agent message that :meth:`_dispatch` would forward unchanged.

        ``body`` is a decoded message read the same way by every parser (a
        canonical frame, or a non-ambiguous :class:`Message`'s body). True
        for a JSON-RPC 2.0 notification (string ``method``, no ``id`` /
        ``result`` / ``error``) whose ``params`` is absent, or an object without
        snake_case decision keys that names a session the client knows (or
        none) and is not a subagent, state or inter-session update (which the
        engine inspects). One call per message on the hot path.
        """
        if type(body) is not dict:
            return False
        try:  # subscripts, not .get: this runs once per forwarded message
            if body["jsonrpc"] != "2.0" or type(method := body["method"]) is not str:
                return False
        except KeyError:
            return False
        if not _NOT_IN_NOTIFICATIONS.isdisjoint(body):
            return False
        params = body.get("params")
        if params is None:
            return True
        if type(params) is not dict or SNAKE_PARAMS_KEY in params:
            return False
        sid = params.get("sessionId")
        if type(sid) is str and sid not in self._known:
            return False
        upd = params.get("update")
        if type(upd) is not dict:
            return True
        if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
            return False
        if method != "session/update":
            return True
        su = upd.get("sessionUpdate")
        return type(su) is not str or su not in _INSPECTED_UPDATES

    def _forward_fast(self, data: bytes, count: int = 1) -> list[Action]:
        """Forwards ``count`` agent messages (joined by newlines in ``data``) unchanged."""
        n = self._n
        n["accepted"] += count
        n["forwarded"] += count
        return [Send(_CLIENT, data)]

    def oversize(self, source: Peer, size_bytes: int, complete: bool, now: float) -> list[Action]:
        """Reports a message skipped by the framer for exceeding ``max_message_bytes``.

        A client's oversize message is answered with ``-32600`` (id ``null``:
        its id was never read); an agent's is dropped. Both are audited.
        """
        out: list[Action] = []
        self._n["accepted"] += 1
        self._n["oversize"] += 1
        limit = self.config.limits.max_message_bytes
        reason = f"message of {size_bytes} bytes exceeds limits.max_message_bytes ({limit})"
        self._audit(out, "oversize_message", source, reason=reason)
        out.append(Report("warning", f"{source.value} sent an oversize message: {reason}"))
        if source is _CLIENT and complete:
            self._answer(out, _CLIENT, None, INVALID_REQUEST, f"acp-proxy: {reason}")
        else:
            self._n["dropped"] += 1
        return out

    def partial(self, source: Peer, size_bytes: int, now: float) -> list[Action]:
        """Reports a half-written last line at end of stream (never forwarded)."""
        out: list[Action] = []
        self._n["accepted"] += 1
        self._n["dropped"] += 1
        self._n["invalid"] += 1
        reason = f"half-written last line at end of stream ({size_bytes} bytes)"
        self._audit(out, "invalid_message", source, reason=reason)
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
        if self._closed[peer] is not None:
            return out
        text = detail or f"{peer.value} closed the connection"
        self._closed[peer] = text
        self._audit(out, "peer_closed", peer, reason=text)
        if peer is _AGENT:
            for ev in self.hold.evict_all("agent_exited"):
                self._expire(ev, now, out)
        waiting = peer.other
        pending = self._pending[waiting]
        for rid, (method, sid) in list(pending.items()):
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
        pending.clear()
        return out

    def pending_requests(self, requester: Peer) -> int:
        """Requests sent by ``requester`` still waiting for an answer."""
        return len(self._pending[requester])

    def get_timer(self) -> float | None:
        """When :meth:`handle_timer` must next be called (seconds), or ``None``."""
        return self.hold.next_deadline()

    def handle_timer(self, now: float) -> list[Action]:
        """Expires held sessions whose ``hold.timeout_seconds`` has passed."""
        out: list[Action] = []
        for ev in self.hold.expire(now):
            self._expire(ev, now, out)
        return out

    def statistics(self) -> CoreStatistics:
        """A snapshot of the counters (see :class:`CoreStatistics`)."""
        n = self._n
        return CoreStatistics(
            held=self.hold.total_messages,
            held_bytes=self.hold.total_bytes,
            pending_client_requests=len(self._pending[_CLIENT]),
            pending_agent_requests=len(self._pending[_AGENT]),
            children=len(self.registry.children),
            protocol_version=self.protocol_version,
            **n,
        )

    # ------------------------------------------------------------ helpers

    def _audit(self, out: list[Action], event: str, source: Peer | None, **fields: Any) -> None:
        out.append(Audit(event, source.direction if source else None, fields))

    def _answer(
        self, out: list[Action], to: Peer, rid: Any, code: int, message: str, data: Any = None
    ) -> None:
        self._n["answered"] += 1
        out.append(Send(to, error_frame(rid, code, message, data)))

    def _drop(self, out: list[Action], m: Message, source: Peer, event: str, reason: str) -> None:
        self._n["dropped"] += 1
        fields: dict[str, Any] = {
            "sessionId": m.session_id,
            "method": m.method,
            "id": m.id,
            "reason": reason,
        }
        if self.config.audit.include_content:
            fields["content"] = m.raw.decode("utf-8", "replace")
        self._audit(out, event, source, **fields)

    def _forward(self, out: list[Action], to: Peer, data: bytes) -> None:
        self._n["forwarded"] += 1
        out.append(Send(to, data))

    def _dispatch(self, source: Peer, m: Message, now: float, out: list[Action]) -> None:
        n = self._n
        n["accepted"] += 1
        open_before = self._unsettled()
        try:
            if m.kind is _INVALID:
                self._invalid(source, m, out)
            elif m.ambiguous:
                self._ambiguous(source, m, out)
            elif source is _CLIENT:
                self._from_client(m, now, out)
            else:
                self._from_agent(m, now, out)
        except RecursionError:
            # Defense in depth: every step is meant to cope with any nesting the
            # decoder accepted; if one does not, the message is refused, not the proxy.
            if self._unsettled() < open_before:
                return  # it was already forwarded, answered, dropped or held
            reason = "nested too deeply to inspect"
            out.append(Report("warning", f"{source.value} sent a message {reason}, refused"))
            if source is _CLIENT and m.kind is _REQUEST:
                self._audit(out, "invalid_message", source, id=m.id, reason=reason)
                self._answer(out, _CLIENT, m.id, INVALID_REQUEST, f"acp-proxy: {reason}")
            else:
                self._drop(out, m, source, "invalid_message", reason)

    def _unsettled(self) -> int:
        """Messages accepted but not yet forwarded, answered, dropped or held."""
        n = self._n
        held = self.hold.total_messages
        return n["accepted"] - n["forwarded"] - n["answered"] - n["dropped"] - held

    def _invalid(self, source: Peer, m: Message, out: list[Action]) -> None:
        self._n["invalid"] += 1
        reason = m.reason or "invalid"
        if source is _CLIENT:
            code = PARSE_ERROR if m.parse_error else INVALID_REQUEST
            rid = None if m.parse_error else m.id
            self._audit(out, "invalid_message", source, id=rid, reason=reason)
            self._answer(out, _CLIENT, rid, code, f"acp-proxy: {reason}")
            return
        if m.parse_error:
            self._n["non_json_agent_lines"] += 1
            preview = m.raw[:200].decode("utf-8", "replace")
            out.append(Report("warning", f"agent stdout line is not JSON, dropped: {preview!r}"))
        else:
            out.append(Report("warning", f"agent sent invalid JSON-RPC, dropped: {reason}"))
        self._drop(out, m, source, "invalid_message", reason)

    def _ambiguous(self, source: Peer, m: Message, out: list[Action]) -> None:
        reason = m.reason or (
            "duplicate keys in decision fields (method, id, params, sessionId, update)"
        )
        body = m.body if isinstance(m.body, dict) else {}
        dups: set[str] = getattr(body, "dups", set())
        if m.kind is _REQUEST:
            rid = None if "id" in dups else m.id
            self._audit(out, "invalid_message", source, id=rid, method=m.method, reason=reason)
            self._answer(
                out, source, rid, INVALID_REQUEST, f"acp-proxy: ambiguous message: {reason}"
            )
        else:
            event = "notification_dropped" if m.kind is _NOTIFICATION else "invalid_message"
            self._drop(out, m, source, event, reason)

    # ------------------------------------------------------- client->agent

    def _from_client(self, m: Message, now: float, out: list[Action]) -> None:
        kind = m.kind
        if kind is _REQUEST or kind is _NOTIFICATION:
            method = m.method
            assert method is not None
            sid = m.session_id
            if sid is not None and method in _OPENS_SESSION:
                self.dedup.reset_session(
                    sid,
                    [c.session_id for c in self.registry.children.values() if c.parent_id == sid],
                )
                if self.registry.mark_known(sid):
                    self._release(sid, now, out, "client opened the session")
            rejection = check_mutation(
                self.registry,
                self._mutations,
                method,
                sid,
                unestablished=sid is not None and self._unestablished(sid),
            )
            if rejection is not None:
                self._n["rejected_mutations"] += 1
                child = self.registry.child(rejection.session_id)
                fields = {
                    "sessionId": rejection.session_id,
                    "parentSessionId": child.parent_id if child else None,
                    "method": method,
                    "id": m.id,
                    "capability": rejection.capability,
                    "reason": rejection.reason,
                }
                if kind is _REQUEST:
                    self._audit(out, "mutation_rejected", _CLIENT, **fields)
                    self._answer(
                        out,
                        _CLIENT,
                        m.id,
                        self.config.enforcement.reject_code,
                        rejection.message,
                        rejection.data,
                    )
                else:
                    self._audit(out, "mutation_rejected", _CLIENT, **fields)
                    self._n["dropped"] += 1
                    self._audit(out, "notification_dropped", _CLIENT, **fields)
                return
            if kind is _REQUEST and not self._track(_CLIENT, m, out):
                return
            gone = self._closed[_AGENT]
            if gone is not None:
                if kind is _REQUEST:
                    self._pending[_CLIENT].pop(m.id, None)
                    self._answer(out, _CLIENT, m.id, INTERNAL_ERROR, f"acp-proxy: {gone}")
                else:
                    self._drop(out, m, _CLIENT, "notification_dropped", gone)
                return
            self._forward(out, _AGENT, m.raw)
            return
        self._response(_CLIENT, m, now, out)

    def _unestablished(self, sid: str) -> bool:
        """Named by the agent but neither created, loaded nor announced to the client."""
        reg = self.registry
        if sid in reg.provisional:
            return True
        return not reg.is_known(sid) and (sid in self.hold or self.hold.announces(sid))

    def _track(self, requester: Peer, m: Message, out: list[Action]) -> bool:
        """Records a request in flight; answers it and returns False if it cannot be."""
        pending = self._pending[requester]
        if m.id in pending:
            reason = f"request id {m.id!r} is already in flight"
        elif len(pending) >= self._max_pending:
            reason = f"more than limits.max_pending_requests ({self._max_pending}) in flight"
        else:
            pending[m.id] = (m.method or "", m.session_id)
            return True
        self._audit(out, "invalid_message", requester, id=m.id, method=m.method, reason=reason)
        self._answer(out, requester, m.id, INVALID_REQUEST, f"acp-proxy: {reason}")
        return False

    def _response(self, source: Peer, m: Message, now: float, out: list[Action]) -> None:
        """A response from ``source`` to a request of the other peer."""
        if m.malformed_error:
            self._n["malformed_errors"] += 1
        to = _AGENT if source is _CLIENT else _CLIENT
        if m.id is None:  # error response to something unreadable: pass it on
            self._forward(out, to, m.raw)
            return
        entry = self._pending[to].pop(m.id, _MISSING)
        if entry is _MISSING:
            self._drop(out, m, source, "unknown_response", f"no request with id {m.id!r} in flight")
            return
        self._forward(out, to, m.raw)
        if source is _AGENT and m.kind is _RESPONSE:
            method = entry[0]
            result = m.body.get("result")
            if method in _CREATES_SESSION and isinstance(result, dict):
                sid = result.get("sessionId")
                if type(sid) is str and self.registry.mark_known(sid):
                    self._release(sid, now, out, f"{method} response")
            elif method == "initialize" and isinstance(result, dict):
                pv = result.get("protocolVersion")
                if type(pv) is int:
                    self.protocol_version = pv

    # ------------------------------------------------------- agent->client

    def _from_agent(self, m: Message, now: float, out: list[Action]) -> None:
        if m.kind is _REQUEST:
            if not self._track(_AGENT, m, out):
                return
            if self._closed[_CLIENT] is not None:
                self._pending[_AGENT].pop(m.id, None)
                self._answer(
                    out, _AGENT, m.id, INTERNAL_ERROR, f"acp-proxy: {self._closed[_CLIENT]}"
                )
                return
        elif m.kind is not _NOTIFICATION:
            self._response(_AGENT, m, now, out)
            return
        # Fast path: a message for a session the client knows, releasing nothing.
        if self._unknown_session(m) is None:
            released = self._deliver(m, now, out)
            if released:
                self._route_all(released, now, out)
            return
        self._route_all([m], now, out)

    def _unknown_session(self, m: Message) -> str | None:
        p = m.params
        if p is None:
            return None
        known = self.registry.known
        sid = p.get("sessionId")
        if type(sid) is str and sid not in known:
            return sid
        if m.method == "session/update":
            upd = p.get("update")
            if type(upd) is dict and upd.get("sessionUpdate") == "session_message":
                for key in ("senderSessionId", "recipientSessionId"):
                    v = upd.get(key)
                    if type(v) is str and v not in known:
                        return v
        return None

    def _route_all(self, msgs: list[Message], now: float, out: list[Action]) -> None:
        """Delivers or holds ``msgs`` in order; messages released by one are
        delivered right after it (depth first, without recursion)."""
        stack: list[Iterator[Message]] = [iter(msgs)]
        while stack:
            m = next(stack[-1], None)
            if m is None:
                stack.pop()
                continue
            sid = self._unknown_session(m)
            if sid is not None:
                self._hold(sid, m, now, out, stack)
                continue
            released = self._deliver(m, now, out)
            if released:
                stack.append(iter(released))

    def _hold(
        self, sid: str, m: Message, now: float, out: list[Action], stack: list[Iterator[Message]]
    ) -> None:
        first = sid not in self.hold
        evicted = self.hold.hold(sid, m, now)
        if first and sid in self.hold:
            self._audit(
                out,
                "held",
                _AGENT,
                sessionId=sid,
                method=m.method,
                id=m.id,
                reason="session not yet known to the client",
            )
        for ev in evicted:
            self._expire(ev, now, out, stack)

    def _release(self, sid: str, now: float, out: list[Action], why: str) -> None:
        msgs = self.hold.take(sid)
        if msgs:
            self._audit(out, "released", _AGENT, sessionId=sid, count=len(msgs), reason=why)
            self._route_all(msgs, now, out)

    def _expire(
        self,
        ev: Evicted,
        now: float,
        out: list[Action],
        stack: list[Iterator[Message]] | None = None,
    ) -> None:
        policy = self.config.hold.on_expire
        why = f"{ev.reason}; {policy}"
        if ev.reason == "agent_exited" and self._closed[_CLIENT] is not None:
            policy = "drop"
            why = f"{ev.reason}; drop (the client is gone too)"
        self._audit(
            out,
            "hold_expired",
            _AGENT,
            sessionId=ev.session_id,
            count=len(ev.messages),
            reason=why,
        )
        if policy == "release":
            out.append(
                Report(
                    "warning",
                    f"agent traffic for unannounced session {ev.session_id!r} released "
                    f"({ev.reason}, {len(ev.messages)} messages): protocol violation",
                )
            )
            self.registry.mark_known(ev.session_id, provisional=True)
            later = self.hold.take(ev.session_id)
            if stack is not None:
                stack.append(iter(ev.messages + later))
            else:
                self._route_all(ev.messages + later, now, out)
            return
        for m in ev.messages:
            if m.kind is _REQUEST and self._pending[_AGENT].pop(m.id, None) is not None:
                self._audit(
                    out,
                    "request_dropped",
                    _AGENT,
                    sessionId=ev.session_id,
                    method=m.method,
                    id=m.id,
                    reason=f"held: {ev.reason}",
                )
                if self._closed[_AGENT] is None:
                    self._answer(
                        out,
                        _AGENT,
                        m.id,
                        INVALID_REQUEST,
                        f"acp-proxy: session {ev.session_id!r} was never announced to the client "
                        f"({ev.reason}); request dropped",
                        {"sessionId": ev.session_id, "reason": ev.reason},
                    )
                else:
                    self._n["dropped"] += 1
            else:  # a notification, or a request already answered when the client left
                event = "request_dropped" if m.kind is _REQUEST else "notification_dropped"
                self._drop(out, m, _AGENT, event, f"held: {ev.reason}")

    def _deliver(self, m: Message, now: float, out: list[Action]) -> list[Message]:
        """Forwards one agent message the client can know about; returns what it releases."""
        if m.method == "session/update":
            p = m.params
            upd = p.get("update") if p is not None else None
            if type(upd) is dict:
                su = upd.get("sessionUpdate")
                if su == "subagent_update":
                    return self._subagent_update(m, upd, now, out)
                if su == "state_update" and self._dedup_on:
                    assert p is not None
                    sid = p.get("sessionId")
                    if type(sid) is str:
                        channel = ("self", sid)
                        if self.dedup.is_duplicate(channel, upd):
                            self._n["duplicates_removed"] += 1
                            self._drop(
                                out,
                                m,
                                _AGENT,
                                "duplicate_dropped",
                                "repeats the last state_update",
                            )
                            return []
                        self.dedup.delivered(channel, upd)
        self._forward(out, _CLIENT, m.raw)
        return []

    def _subagent_update(
        self, m: Message, upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message]:
        p = m.params
        assert p is not None
        parent = p.get("sessionId")
        view = view_subagent_update(upd)
        if view is None or type(parent) is not str:
            self._audit(
                out,
                "invalid_subagent_update",
                _AGENT,
                sessionId=parent,
                method=m.method,
                reason="subagent_update without a string sessionId",
            )
            self._forward(out, _CLIENT, m.raw)
            return []
        cid = view.session_id
        reg = self.registry
        existing = reg.child(cid)
        data = m.raw
        if (
            existing is not None
            and self._dedup_on
            and view.state is not UNSET
            and self.dedup.is_duplicate(("mirror", cid), view.state)
        ):
            only_state = (
                not reg.would_change(view)
                and not view.malformed
                and upd.keys() <= _SUBAGENT_KEYS
                and p.keys() <= {"sessionId", "update"}
                and m.body.keys() <= {"jsonrpc", "method", "params"}
            )
            reg.apply(parent, view, now)
            if only_state:
                self._n["duplicates_removed"] += 1
                self._drop(
                    out, m, _AGENT, "duplicate_dropped", "repeats the child's last state mirror"
                )
                return []
            try:
                body = exact_body(m.raw)
                del body["params"]["update"]["state"]
                data = dumps(body, allow_nan=False)
            except (ValueError, RecursionError):
                # A number JSON cannot spell back (1e400), or nesting too deep for
                # the standard library here: forward the original bytes.
                data = m.raw
            else:
                self._n["duplicates_removed"] += 1
                self._audit(
                    out,
                    "duplicate_dropped",
                    _AGENT,
                    sessionId=cid,
                    parentSessionId=parent,
                    method=m.method,
                    reason="state field removed: repeats the child's last state mirror",
                )
            self._audit(
                out, "child_updated", _AGENT, sessionId=cid, parentSessionId=existing.parent_id
            )
            self._forward(out, _CLIENT, data)
            return []
        outcome = reg.apply(parent, view, now)
        if outcome is UpdateOutcome.REFUSED:
            limit = self.config.limits.max_children
            self._drop(out, m, _AGENT, "notification_dropped", f"limits.max_children ({limit})")
            return []
        if outcome is UpdateOutcome.INVALID:
            self._audit(
                out,
                "invalid_subagent_update",
                _AGENT,
                sessionId=cid,
                parentSessionId=parent,
                reason="names the parent itself, an ancestor, or a known ordinary session",
            )
            self._forward(out, _CLIENT, data)
            return []
        if self._dedup_on and view.state is not UNSET:
            self.dedup.delivered(("mirror", cid), view.state)
        child = reg.child(cid)
        assert child is not None
        self._forward(out, _CLIENT, data)
        if outcome is UpdateOutcome.ANNOUNCED:
            self._audit(out, "child_announced", _AGENT, sessionId=cid, parentSessionId=parent)
            msgs = self.hold.take(cid)
            if msgs:
                self._audit(
                    out, "released", _AGENT, sessionId=cid, count=len(msgs), reason="announced"
                )
            return msgs
        self._audit(out, "child_updated", _AGENT, sessionId=cid, parentSessionId=child.parent_id)
        return []
