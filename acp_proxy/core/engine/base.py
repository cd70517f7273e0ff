"""State, helpers and request tracking shared by both sides of the proxy engine.

DESIGN.md section 2. :class:`EngineBase` holds one connection's state (config,
registry, hold buffer, dedup, requests in flight per direction, counters) and
the steps both directions use: audit, answer, drop, forward, and the tracking
of requests and their responses. :class:`~acp_proxy.core.engine.client_side.ClientSide`
(enforcement) and :class:`~acp_proxy.core.engine.agent_side.AgentSide` (hold, registry,
dedup) build on it; :class:`~acp_proxy.core.engine.ProxyCore` is both.
"""

from __future__ import annotations

import abc
from typing import Any

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, Audit, Peer, Report, Send
from acp_proxy.core.session.dedup import StateDedup
from acp_proxy.core.session.hold import HoldBuffer
from acp_proxy.core.session.registry import Registry
from acp_proxy.core.wire.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    Kind,
    Message,
    error_frame,
    parse,
)

__all__ = ["EngineBase"]

# Enum members as module globals (``Kind.X`` / ``Peer.X`` are slow attribute
# lookups), imported by the other engine modules.
_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE
_BATCH = Kind.BATCH
_INVALID = Kind.INVALID
_CREATES_SESSION = frozenset({"session/new", "session/fork"})
_OPENS_SESSION = frozenset({"session/load", "session/resume"})
_MISSING: Any = object()


class EngineBase(abc.ABC):
    """One connection's state and the steps shared by both directions.

    Args:
        config: the effective configuration (defaults when omitted).
    """

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        limits = self.config.limits
        self.registry = Registry(
            limits.max_children,
            max_sessions=limits.max_sessions,
            max_child_bytes=limits.max_child_bytes,
            max_registry_bytes=limits.max_registry_bytes,
        )
        self._known = self.registry.known  # the same set, one attribute lookup less
        self._dense_bytes = limits.dense_message_bytes
        self._min_value_bytes = limits.min_bytes_per_value
        self.hold = HoldBuffer(self.config.hold, self._reparse)
        self.dedup = StateDedup(limits.max_dedup_bytes)
        # counting a snapshot's memory stops past this (it would not be remembered)
        self._dedup_cap = limits.max_dedup_bytes
        self._max_sid = limits.max_session_id_bytes
        self._max_pending_bytes = limits.max_pending_bytes
        # requester -> bytes of ids, methods and session ids in flight
        self._pending_bytes: dict[Peer, int] = {_CLIENT: 0, _AGENT: 0}
        self._mutations = self.config.enforcement.child_mutations
        self._read_only = frozenset(self.config.enforcement.child_read_only)
        # v1: did the client advertise clientCapabilities.subagents?
        self.client_subagents = False
        self._dedup_on = self.config.dedup.state_reports
        self._max_pending = self.config.limits.max_pending_requests
        # requester -> {id: (method, sessionId, bytes)} of requests in flight
        self._pending: dict[Peer, dict[Any, tuple[str, Any, int]]] = {_CLIENT: {}, _AGENT: {}}
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

    # ------------------------------------------------------------ helpers

    def _reparse(self, raw: bytes) -> Message:
        """:func:`~acp_proxy.core.wire.jsonrpc.parse` with this connection's limits."""
        return parse(raw, self._dense_bytes, self._min_value_bytes)

    def _audit(self, out: list[Action], event: str, source: Peer | None, **fields: Any) -> None:
        out.append(Audit(event, source.direction if source else None, fields))

    def _answer(
        self, out: list[Action], to: Peer, rid: Any, code: int, message: str, data: Any = None
    ) -> None:
        """Answers a message of ``to`` with an error; when ``rid`` is an id of ``to``'s still
        in flight, drops it instead (audited): that id gets one answer, the other peer's."""
        if rid is not None and rid in self._pending[to]:
            self._n["dropped"] += 1
            self._audit(
                out,
                "request_dropped",
                to,
                id=rid,
                reason=f"refused ({message}); its id is already in flight, so not answered",
            )
            return
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

    # ------------------------------------------------- requests in flight

    def _track(self, requester: Peer, m: Message, out: list[Action]) -> bool:
        """Records a request in flight; answers or drops it and returns False if it cannot be.

        A request reusing an id already in flight is dropped unanswered (audited):
        any answer would be a second response to that id.
        """
        pending = self._pending[requester]
        if m.id in pending:
            self._drop(
                out,
                m,
                requester,
                "request_dropped",
                f"request id {m.id!r} is already in flight (an answer would be its second)",
            )
            return False
        method = m.method or ""
        sid = m.session_id
        rid = m.id
        id_bytes = len(rid) if type(rid) is str else int(rid or 0).bit_length() // 3 + 2
        cost = id_bytes + len(method) + (len(sid) if sid is not None else 0)
        if len(pending) >= self._max_pending:
            reason = f"more than limits.max_pending_requests ({self._max_pending}) in flight"
        elif self._pending_bytes[requester] + cost > self._max_pending_bytes:
            reason = f"more than limits.max_pending_bytes ({self._max_pending_bytes}) in flight"
        else:
            pending[m.id] = (method, sid, cost)
            self._pending_bytes[requester] += cost
            return True
        self._audit(out, "invalid_message", requester, id=m.id, method=m.method, reason=reason)
        self._answer(out, requester, m.id, INVALID_REQUEST, f"acp-proxy: {reason}")
        return False

    def _untrack(self, requester: Peer, rid: Any) -> tuple[str, Any, int] | None:
        """Forgets a request of ``requester`` in flight; returns its entry, or ``None``."""
        entry = self._pending[requester].pop(rid, None)
        if entry is not None:
            self._pending_bytes[requester] -= entry[2]
        return entry

    def _response(self, source: Peer, m: Message, now: float, out: list[Action]) -> None:
        """A response from ``source`` to a request of the other peer."""
        if m.malformed_error:
            self._n["malformed_errors"] += 1
        to = _AGENT if source is _CLIENT else _CLIENT
        if m.id is None:  # error response to something unreadable: pass it on
            self._forward(out, to, m.raw)
            return
        entry = self._untrack(to, m.id)
        if entry is None:
            self._drop(out, m, source, "unknown_response", f"no request with id {m.id!r} in flight")
            return
        self._forward(out, to, m.raw)
        if source is _AGENT:
            method = entry[0]
            if method in _OPENS_SESSION and type(entry[1]) is str:
                self._opened(entry[1], m.kind is _RESPONSE)
                return
            if m.kind is not _RESPONSE:
                return
            result = m.body.get("result")
            if method == "session/close" and type(entry[1]) is str:
                self._closed_session(entry[1], out)
            elif method in _CREATES_SESSION and isinstance(result, dict):
                sid = result.get("sessionId")
                if type(sid) is str and len(sid) > self._max_sid:
                    pass  # never known: its traffic is held and expires
                elif type(sid) is str and self.registry.mark_known(sid):
                    self._release(sid, now, out, f"{method} response")
            elif method == "initialize" and isinstance(result, dict):
                pv = result.get("protocolVersion")
                if type(pv) is int:
                    self.protocol_version = pv

    def _opened(self, sid: str, ok: bool) -> None:
        """The agent answered a load / resume of ``sid``: a new dedup epoch; an
        error answer forgets an id the request made known."""
        reg = self.registry
        self.dedup.reset_session(sid, reg.descendants(sid))
        reg.end_open(sid, ok)

    def _closed_session(self, sid: str, out: list[Action]) -> None:
        """``sid`` was closed: its descendants leave the registry (mutations on them
        are refused from then on)."""
        gone = self.registry.retire_descendants(sid)
        if gone:
            self.dedup.reset_session(sid, gone)
            self._audit(
                out,
                "children_retired",
                _AGENT,
                sessionId=sid,
                count=len(gone),
                reason="parent session closed; mutations naming them are refused",
            )

    @abc.abstractmethod
    def _release(self, sid: str, now: float, out: list[Action], why: str) -> None:
        """Delivers the traffic held for ``sid``, which the client now knows."""
