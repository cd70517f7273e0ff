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

from collections.abc import Callable, Collection
from typing import Any

import attrs

from acp_proxy.core.actions import Action, Peer, Report, Send
from acp_proxy.core.engine.agent_side import CANCEL_REQUEST, AgentSide
from acp_proxy.core.engine.base import _AGENT, _BATCH, _CLIENT, _INVALID, _NOTIFICATION, _REQUEST
from acp_proxy.core.engine.client_side import ClientSide
from acp_proxy.core.wire.framing import Lines
from acp_proxy.core.wire.guard import SNAKE_PARAMS_KEYS, SNAKE_UPDATE_KEYS, meta_decision_key
from acp_proxy.core.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    Message,
    canonical,
    error_frame,
    parse,
)
from acp_proxy.core.wire.runs import Envelope, envelope_run, plain_run, update_kind

__all__ = ["CoreStatistics", "ProxyCore"]

# sessionUpdate -> when it needs more than forwarding (AgentSide._unknown_session,
# _deliver): always (None), or when the update holds this key (a list whose items
# may reference a session). Absent: never.
_INSPECTED_UPDATES: dict[str, str | None] = {
    "session_message": None,
    "subagent_update": None,
    "state_update": None,
    "tool_call": "content",
    "tool_call_update": "content",
}
_NEVER: Any = object()
_ID_KEYS = ("sessionId", "senderSessionId", "recipientSessionId")
_REF_KEYS = ("content", "background")
_NOT_IN_NOTIFICATIONS = frozenset({"id", "result", "error"})
_PARAMS_SLOW_KEYS = SNAKE_PARAMS_KEYS | {"_meta"}


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


class ProxyCore(ClientSide, AgentSide):
    """The sans-IO proxy engine for one client-agent connection.

    Args:
        config: the effective configuration (defaults when omitted).

    Every public method returns a list of actions for the shell to carry out
    in order; none of them raises on anything a peer sends. The hot path
    (agent notifications forwarded unchanged) is here; client-side
    enforcement is in :mod:`~acp_proxy.core.engine.client_side`, hold, registry and
    dedup in :mod:`~acp_proxy.core.engine.agent_side`, shared state in
    :mod:`~acp_proxy.core.engine.base`.
    """

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
        return self._frame(source, raw, now)

    def receive_frames(self, source: Peer, frames: list[bytes], now: float) -> list[Action]:
        """Handles several frames from ``source``, in order (same as :meth:`receive` each).

        Agent notifications that need no inspection (a session the client
        knows, not a subagent, state or inter-session update) are forwarded
        without building a :class:`~acp_proxy.core.wire.jsonrpc.Message`.

        Args:
            source: the peer that sent them.
            frames: the frames, without line endings.
            now: the current time, seconds.

        Returns:
            Actions to carry out in order.
        """
        return self._frames(source, frames, now)

    def receive_lines(self, source: Peer, lines: Lines, now: float) -> list[Action]:
        """Handles a run of complete lines from ``source`` (same as :meth:`receive_frames`).

        An agent run is decoded in one call when every line is a
        ``session/update``-shaped envelope (:func:`~acp_proxy.core.wire.runs.envelope_run`,
        content left undecoded) or else canonical JSON
        (:func:`~acp_proxy.core.wire.runs.plain_run`); each stretch of unremarkable
        notifications in it is then forwarded as one
        :class:`~acp_proxy.core.actions.Send` of the original bytes, its
        messages joined by ``b"\\n"``, and any other line is handled as
        :meth:`receive` handles it, in order. Otherwise the lines are split
        and handled one by one.

        Args:
            source: the peer that sent them.
            lines: the run, as :meth:`~acp_proxy.core.wire.framing.LineFramer.feed_runs` gives it.
            now: the current time, seconds.

        Returns:
            Actions to carry out in order.
        """
        out = self._run(lines.data, now) if source is _AGENT else None
        return self._frames(source, lines.frames(), now) if out is None else out

    # Every whole-frame decoder (parse, canonical, envelope_run, plain_run) is
    # called exactly two Python frames below the public entry point (entry ->
    # worker -> decoder). msgspec and json count nesting against the recursion
    # limit from the caller's depth: equal depths give a frame nested near that
    # limit the same verdict whichever path (and read boundaries) it comes
    # through. Held messages are parsed again on release, deeper; only messages
    # nested at most agent_side.MAX_HELD_NESTING deep are held, far from the limit.

    def _frame(self, source: Peer, raw: bytes, now: float) -> list[Action]:
        return self._message(source, parse(raw, self._dense_bytes, self._min_value_bytes), now)

    def _frames(self, source: Peer, frames: list[bytes], now: float) -> list[Action]:
        out: list[Action] = []
        if source is not _AGENT:
            for raw in frames:
                out.extend(
                    self._message(source, parse(raw, self._dense_bytes, self._min_value_bytes), now)
                )
            return out
        uninspected = self._uninspected
        dense = self._dense_bytes
        for raw in frames:
            if uninspected(canonical(raw, dense)):
                out.extend(self._forward_fast(raw))
            else:
                out.extend(
                    self._message(source, parse(raw, self._dense_bytes, self._min_value_bytes), now)
                )
        return out

    def _run(self, data: bytes, now: float) -> list[Action] | None:
        """An agent run decoded at once, or ``None`` when it cannot be (one item per line)."""
        items: list[Any] | None = envelope_run(data)
        uninspected: Callable[[Any], bool] = self._envelope_uninspected
        if items is None:
            items = plain_run(data)
            uninspected = self._uninspected
            if items is None:
                return None
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
            out.extend(
                self._message(
                    _AGENT, parse(frames[j], self._dense_bytes, self._min_value_bytes), now
                )
            )
            start = j + 1
        if not frames:
            return self._forward_fast(data, len(items))
        if start < len(frames):
            out.extend(self._forward_fast(b"\n".join(frames[start:]), len(frames) - start))
        return out

    def _message(self, source: Peer, m: Message, now: float) -> list[Action]:
        """One parsed frame (a message, or a batch of them) from ``source``."""
        if (
            m.kind is _NOTIFICATION
            and source is _AGENT
            and not m.ambiguous
            and self._uninspected(m.body)
        ):
            return self._forward_fast(m.raw)
        out: list[Action] = []
        if m.kind is _BATCH:
            self._batch(source, m, out)
        else:
            self._dispatch(source, m, now, out)
        return out

    def _batch(self, source: Peer, m: Message, out: list[Action]) -> None:
        """Refuses a JSON-RPC batch whole, as both SDKs do (PROTOCOL.md section 4,
        "Batches"): nothing inside it reaches the other peer.

        A client's batch is one message answered with one ``-32600`` (id
        ``null``). An agent's batch counts each element: a request whose id
        can be read is answered ``-32600`` to the agent, the rest are dropped;
        one audit record covers the batch.
        """
        reason = "ACP does not use JSON-RPC batches"
        n = self._n
        if source is _CLIENT:
            n["accepted"] += 1
            self._audit(out, "invalid_message", source, id=None, reason=reason)
            self._answer(out, _CLIENT, None, INVALID_REQUEST, f"acp-proxy: {reason}")
            return
        items = m.items  # () for a batch over limits.dense_message_bytes: not read
        count = max(1, len(items))
        n["accepted"] += count
        answered = 0
        for item in items:
            if item.kind is _REQUEST and item.id is not None:
                answered += 1
                self._answer(out, _AGENT, item.id, INVALID_REQUEST, f"acp-proxy: {reason}")
        n["dropped"] += count - answered
        self._audit(
            out,
            "batch_refused",
            source,
            count=count,
            answered=answered,
            reason=f"{reason}: {count} elements refused",
        )
        out.append(Report("warning", f"agent sent a JSON-RPC batch, refused: {reason}"))

    def _envelope_uninspected(self, env: Envelope) -> bool:
        """:meth:`_uninspected` for an :class:`~acp_proxy.core.wire.runs.Envelope`.

        The envelope's type already rules out ``id`` / ``result`` / ``error``
        and a snake_case ``session_id`` in ``params`` (unknown keys refused);
        a ``params._meta`` naming a decision key is left to :func:`parse`.
        """
        if env.jsonrpc != "2.0":
            return False
        params = env.params
        if params.sessionId not in self._known:
            return False
        upd = params.update
        if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
            return False
        meta = params.meta
        if type(meta) is dict and any(meta_decision_key(k) for k in meta):
            return False
        if env.method != "session/update":
            return True
        su = upd.get("sessionUpdate")
        if su is None:
            return True
        need = _INSPECTED_UPDATES.get(update_kind(su) or "", _NEVER)
        return need is _NEVER or (need is not None and need not in upd)

    def _uninspected(self, body: Any) -> bool:
        """True for an agent message that :meth:`_dispatch` would forward unchanged.

        ``body`` is a decoded message read the same way by every parser (a
        canonical frame, or a non-ambiguous :class:`Message`'s body). True
        for a JSON-RPC 2.0 notification (string ``method``, no ``id`` /
        ``result`` / ``error``) whose ``params`` is absent, or an object without
        snake_case decision keys or ``_meta`` that names a session the client knows (or
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
        if type(params) is not dict or not _PARAMS_SLOW_KEYS.isdisjoint(params):
            return False  # snake_case aliases, and _meta (spread by an SDK): parse decides
        sid = params.get("sessionId")
        if type(sid) is str:
            if sid not in self._known:
                return False
        elif "sessionId" in params:
            return False  # not a string: refused (ProxyCore._bad_session_id)
        upd = params.get("update")
        if type(upd) is not dict:
            # a $/cancel_request naming a held request is held behind it
            return method != CANCEL_REQUEST or self._held_request_session(params) is None
        if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
            return False
        if method != "session/update":
            return True
        su = upd.get("sessionUpdate")
        if type(su) is not str:
            return True
        need = _INSPECTED_UPDATES.get(su, _NEVER)
        return need is _NEVER or (need is not None and need not in upd)

    def _forward_fast(self, data: bytes, count: int = 1) -> list[Action]:
        """Forwards ``count`` agent messages (joined by newlines in ``data``) unchanged."""
        n = self._n
        n["accepted"] += count
        n["forwarded"] += count
        return [Send(_CLIENT, data)]

    def oversize(
        self, source: Peer, size_bytes: int, complete: bool, now: float, rid: Any = None
    ) -> list[Action]:
        """Reports a message skipped by the framer for exceeding ``max_message_bytes``.

        A client's oversize message is answered with ``-32600``, with its id
        ``rid`` when the shell could read it from the message's start
        (:func:`~acp_proxy.core.wire.jsonscan.request_id_from_prefix`), else
        ``null`` (also when ``rid`` is in flight: a later ``id`` could differ);
        an agent's is dropped. Both are audited.
        """
        out: list[Action] = []
        self._n["accepted"] += 1
        self._n["oversize"] += 1
        limit = self.config.limits.max_message_bytes
        reason = f"message of {size_bytes} bytes exceeds limits.max_message_bytes ({limit})"
        self._audit(out, "oversize_message", source, reason=reason)
        out.append(Report("warning", f"{source.value} sent an oversize message: {reason}"))
        if source is _CLIENT and complete:
            if rid in self._pending[_CLIENT]:
                rid = None
            self._answer(out, _CLIENT, rid, INVALID_REQUEST, f"acp-proxy: {reason}")
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
        for rid, (method, sid, _cost) in list(pending.items()):
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
        self._pending_bytes[waiting] = 0
        return out

    def pending_ids(self, requester: Peer) -> Collection[Any]:
        """The ids of ``requester``'s requests still in flight (a read-only view)."""
        return self._pending[requester].keys()

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

    # ------------------------------------------------------------ dispatch

    def _bad_session_id(self, params: dict[str, Any]) -> bool:
        """True when ``params.sessionId`` is present but not a string, or it or
        ``params.update.sessionId`` is a string longer than
        ``limits.max_session_id_bytes`` (every field naming a session is
        type-checked, and state keyed by session ids stays bounded in bytes)."""
        named = params.get("sessionId", "")
        if type(named) is not str:
            return True
        upd = params.get("update")
        ids: list[Any] = [named]
        if type(upd) is dict:
            # every reference the hold buffer may key on (AgentSide._unknown_session)
            ids += (upd.get(k) for k in _ID_KEYS)
            for key in _REF_KEYS:
                items = upd.get(key)
                if type(items) is list:
                    ids += (i.get("sessionId") for i in items if type(i) is dict)
        limit = self._max_sid
        for sid in ids:
            if (
                type(sid) is str
                and len(sid) > limit // 4
                and (len(sid) > limit or len(sid.encode("utf-8", "surrogatepass")) > limit)
            ):
                return True
        return False

    def _too_long(self, source: Peer, m: Message, out: list[Action]) -> None:
        """Refuses a message whose session id is not a string or is over the limit
        (answered or dropped)."""
        sid = m.params.get("sessionId") if m.params is not None else None
        reason = (
            f"session id longer than limits.max_session_id_bytes ({self._max_sid})"
            if type(sid) is str or sid is None
            else "params.sessionId must be a string"
        )
        if source is _AGENT:
            self._refuse(m, out, reason)
            return
        if m.kind is _REQUEST:
            self._audit(out, "invalid_message", source, id=m.id, method=m.method, reason=reason)
            self._answer(out, _CLIENT, m.id, INVALID_PARAMS, f"acp-proxy: {reason}")
        else:
            self._drop(out, m, source, "invalid_message", reason)

    def _dispatch(self, source: Peer, m: Message, now: float, out: list[Action]) -> None:
        n = self._n
        n["accepted"] += 1
        open_before = self._unsettled()
        try:
            if m.kind is _INVALID:
                self._invalid(source, m, out)
            elif m.params is not None and self._bad_session_id(m.params):
                self._too_long(source, m, out)
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
            if source is _AGENT:
                self._refuse(m, out, reason)  # answers an agent request in flight
                return
            out.append(Report("warning", f"client sent a message {reason}, refused"))
            if m.kind is _REQUEST:
                self._untrack(_CLIENT, m.id)  # it never reaches the agent
                self._audit(out, "invalid_message", source, id=m.id, reason=reason)
                self._answer(out, _CLIENT, m.id, INVALID_REQUEST, f"acp-proxy: {reason}")
            else:
                self._drop(out, m, source, "invalid_message", reason)
