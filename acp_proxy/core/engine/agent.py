"""The agent direction: hold buffer, subagent registry and duplicate state reports.

docs/design.md section 2. Agent traffic for a session the client cannot know yet is
held and released, in order, right after the message that makes it known;
``subagent_update`` patches the registry; repeated state reports are removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from acp_proxy.config import Config
from acp_proxy.config.model import PERMISSION_METHODS
from acp_proxy.core.actions import Action, AuditEvent, Peer, Report
from acp_proxy.core.engine.context import EngineContext, EnginePart
from acp_proxy.core.engine.elicitation import ELICITATION_CREATE
from acp_proxy.core.engine.negotiated import peer_info, peer_name
from acp_proxy.core.session.hold import Evicted
from acp_proxy.core.session.patch import UNSET, Unset
from acp_proxy.core.session.registry import MAX_DEPTH, Child, UpdateOutcome
from acp_proxy.core.session.schema import PATCH_FIELDS, SubagentUpdate, view_subagent_update
from acp_proxy.core.session.size import footprint
from acp_proxy.core.wire.checks import long_session_id
from acp_proxy.core.wire.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, Kind, Message
from acp_proxy.core.wire.jsonscan import without_member
from acp_proxy.core.wire.passthrough import CANCEL_REQUEST, REFERENCE_LISTS, UPDATE_RULES
from acp_proxy.core.wire.verdict import Verdict
from acp_proxy.core.wire.views import VIEW_KEY

__all__ = ["CANCEL_REQUEST", "AgentDirection"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE

_SUBAGENT_KEYS = frozenset({"sessionUpdate", "sessionId", *PATCH_FIELDS})
_OK = Verdict.OK
_REPEATS_REPORT = "repeats the last state_update"


#: A ``subagent_update``'s state mirror (:meth:`AgentDirection._mirror`).
_Mirror = list[Any] | None | Unset


def _name(value: str | None) -> str:
    return repr(value) if value is not None else "(unnamed)"


class AgentDirection(EnginePart):
    """What :class:`~acp_proxy.core.engine.ProxyCore` does with agent messages.

    Args:
        ctx: the engine context. Read here: the configuration (``dedup``,
            ``hold.on_expire``, limits), the subagent registry (patched here), the
            hold buffer, the duplicate state report filter, the ledger (outcomes,
            counters and requests in flight), what ``initialize`` negotiated, the
            permission gate (decides governed agent requests on delivery), the
            budget gate (turns, tool calls, usage, repeated permission requests)
            and the elicitation gate (on delivery).
    """

    def __init__(self, ctx: EngineContext) -> None:
        super().__init__(ctx)
        # counting a snapshot's memory stops past this (it would not be remembered)
        self._dedup_cap = ctx.limits.max_dedup_bytes
        self._max_sid = ctx.limits.max_session_id_bytes
        # the last subagent_update read and its view (:meth:`_view`)
        self._last_view: tuple[dict[str, Any], SubagentUpdate | None] | None = None
        ctx.follow(self)

    def configure(self, config: Config) -> None:
        """Takes the ``dedup`` section of ``config`` (:meth:`EngineContext.reconfigure`)."""
        self._dedup_on = config.dedup.state_reports

    def handle(self, m: Message, now: float, out: list[Action]) -> None:
        """One classified agent message (request, notification or response)."""
        if m.kind is _REQUEST:
            if not self.ledger.track(_AGENT, m, out):
                return
            if self.gate.answered:
                self.gate.new_request(m.id)
            if self.inflight.gone[_CLIENT] is not None:
                self.inflight.pop(_AGENT, m.id)
                self.ledger.answer(
                    out, _AGENT, m.id, INTERNAL_ERROR, f"acp-proxy: {self.inflight.gone[_CLIENT]}"
                )
                return
        elif m.kind is not _NOTIFICATION:
            self._response(m, now, out)
            return
        # Fast path: a message for a session the client knows, releasing nothing.
        if self.unknown_session(m) is None:
            released = self.deliver(m, now, out)
            if released:
                self.route_all(released, now, out)
            return
        self.route_all([m], now, out)

    def repeated_report(self, m: Message, out: list[Action]) -> bool:
        """Drops ``m`` as :meth:`handle` would and returns True when it is a
        ``state_update`` notification byte for byte the frame that delivered its
        session's last report (:meth:`~acp_proxy.core.session.dedup.StateDedup.repeats`)
        and no session it names is unknown; else False, nothing done (issue 29).

        The whole path decides the same for such a message, step by step: a
        ``state_update`` is never on the fast path (always inspected); the frame
        was delivered, so its verdict is ``OK`` (and ``m``'s, the same bytes
        parsed by the same pure function); it is delivered when
        :meth:`unknown_session` finds nothing (asked here too), then read by
        :meth:`_read_state_update`, which finds it a duplicate (the same bytes:
        the same snapshot) and drops it with the same audit record. A turn
        budget counts each report, so while one does this is not taken.
        """
        if (
            m.kind is not _NOTIFICATION
            or m.verdict is not _OK
            or not self._dedup_on
            or self.budgets.watches_turns
        ):
            return False
        p = m.params
        if p is None:
            return False
        sid = p.get("sessionId")
        if (
            type(sid) is not str
            or not self.dedup.repeats(("self", sid), m.raw)
            or self.unknown_session(m) is not None
        ):
            return False
        n = self.n
        n.accepted += 1
        n.duplicates_removed += 1
        self.ledger.drop(out, m, _AGENT, AuditEvent.DUPLICATE_DROPPED, _REPEATS_REPORT)
        return True

    def _response(self, m: Message, now: float, out: list[Action]) -> None:
        """An agent response to a client request: forwarded, then what it settles
        (:data:`_SETTLES`: a session created or opened, closed, the negotiated version)."""
        entry = self.ledger.settle(_AGENT, m, out)
        if entry is None:
            return
        method, sid = entry[0], entry[1]
        ok = m.kind is _RESPONSE
        if method == "session/prompt" and self.budgets.watches_turns:
            self.budgets.prompt_answered(m.id, ok, self.negotiated.protocol_version)
        result = m.body.get("result") if ok else None
        self.gate.agent_answered(m.id, method, sid, result, ok)
        settle = _SETTLES.get(method)
        if settle is not None:
            settle(self, m, method, sid, result, now, out)

    # --- what an agent response settles, by the request's method (_SETTLES);
    # ``sid``: the session the request named, ``result``: ``None`` for an error

    def _settle_open(
        self, m: Message, method: str, sid: Any, result: Any, now: float, out: list[Action]
    ) -> None:
        if type(sid) is str:
            self._opened(sid, m.kind is _RESPONSE)

    def _settle_close(
        self, m: Message, method: str, sid: Any, result: Any, now: float, out: list[Action]
    ) -> None:
        if m.kind is _RESPONSE and type(sid) is str:
            self._closed_session(sid, out)

    def _settle_create(
        self, m: Message, method: str, sid: Any, result: Any, now: float, out: list[Action]
    ) -> None:
        if not isinstance(result, dict):
            return
        sid = result.get("sessionId")
        if type(sid) is not str or long_session_id(sid, self._max_sid):
            return  # an id over the limit is never known: its traffic is held and expires
        self.ledger.info(out, "session created", f"session {sid!r} created")
        if self.registry.mark_known(sid):
            self.release(sid, now, out, f"{method} response")

    def _settle_initialize(
        self, m: Message, method: str, sid: Any, result: Any, now: float, out: list[Action]
    ) -> None:
        if not isinstance(result, dict):
            return
        neg = self.negotiated
        pv = result.get("protocolVersion")
        asked = neg.client_protocol_version
        if type(pv) is int and asked is not None and pv > asked:
            self.ledger.audit(
                out,
                AuditEvent.PROTOCOL_VIOLATION,
                _AGENT,
                method=method,
                id=m.id,
                reason=f"initialize answered protocol version {pv}, above the {asked} "
                f"the client asked for; {asked} is assumed",
            )
            pv = asked
        if type(pv) is int:
            neg.protocol_version = pv
        neg.agent_name = peer_name(peer_info(result, "agentInfo"))
        self.ledger.info(
            out,
            "initialized",
            f"initialized, protocol version {neg.protocol_version or '?'}; "
            f"client {_name(neg.client_name)}, agent {_name(neg.agent_name)}",
        )

    def _opened(self, sid: str, ok: bool) -> None:
        """The agent answered a load / resume of ``sid``: a new dedup epoch; an
        error answer forgets an id the request made known."""
        reg = self.registry
        self.dedup.reset_session(sid, reg.descendants(sid))
        reg.end_open(sid, ok)

    def _closed_session(self, sid: str, out: list[Action]) -> None:
        """``sid`` was closed: its descendants leave the registry (mutations on them
        are refused from then on)."""
        self.budgets.closed(sid)
        gone = self.registry.retire_descendants(sid)
        if gone:
            self.dedup.reset_session(sid, gone)
            self.ledger.audit(
                out,
                AuditEvent.CHILDREN_RETIRED,
                _AGENT,
                sessionId=sid,
                count=len(gone),
                reason="parent session closed; mutations naming them are refused",
            )

    def unknown_session(self, m: Message) -> str | None:
        """The first session id in ``m`` the client cannot know yet, else ``None``.

        References (docs/protocol.md section 4, found through
        :data:`~acp_proxy.core.wire.passthrough.UPDATE_RULES`): ``params.sessionId``; in a
        ``session/update``, a ``session_message``'s sender and recipient, a
        ``session`` content item of a ``tool_call`` / ``tool_call_update``,
        and a ``subagent`` entry of a ``state_update``'s ``background``.
        """
        p = m.params
        if p is None:
            return None
        if m.method == CANCEL_REQUEST:
            return self._held_request_session(p)
        known = self.registry.known
        sid = p.get("sessionId")
        if type(sid) is str and sid not in known:
            return sid
        if m.method == "session/update":
            upd = p.get("update")
            if type(upd) is not dict:
                return None
            su = upd.get("sessionUpdate")
            if type(su) is not str:
                return None  # a kind that names nothing (and is not hashable as a key)
            if su == "session_message":
                for key in UPDATE_RULES["session_message"].ids:
                    v = upd.get(key)
                    if type(v) is str and v not in known:
                        return v
            elif su in REFERENCE_LISTS:
                key, kind = REFERENCE_LISTS[su]
                items = upd.get(key)
                if type(items) is list:
                    for item in items:
                        if type(item) is dict and item.get("type") == kind:
                            v = item.get("sessionId")
                            if type(v) is str and v not in known:
                                return v
        return None

    def _held_request_session(self, params: dict[str, Any]) -> str | None:
        """For an agent ``$/cancel_request``: the session under which the agent request it
        names is held, if it is (the cancel is then held behind it, in order), else ``None``."""
        rid = params.get("requestId")
        if type(rid) is not str and type(rid) is not int:
            return None
        entry = self.inflight.pending[_AGENT].get(rid)
        sid = None if entry is None else entry[1]
        return sid if type(sid) is str and sid in self.hold else None

    def route_all(self, msgs: list[Message], now: float, out: list[Action]) -> None:
        """Delivers or holds ``msgs`` in order; messages released by one are
        delivered right after it (depth first, without recursion)."""
        stack: list[Iterator[Message]] = [iter(msgs)]
        while stack:
            m = next(stack[-1], None)
            if m is None:
                stack.pop()
                continue
            sid = self.unknown_session(m)
            if sid is not None:
                self._hold(sid, m, now, out, stack)
                continue
            released = self.deliver(m, now, out)
            if released:
                stack.append(iter(released))

    def refuse(self, m: Message, out: list[Action], reason: str) -> None:
        """Refuses one agent message: a request is answered (and audited), the rest dropped."""
        out.append(Report("warning", f"agent sent a message {reason}, refused"))
        if not self._drop_request(m, out, m.session_id, reason, f"acp-proxy: {reason}"):
            self.ledger.drop(out, m, _AGENT, AuditEvent.INVALID_MESSAGE, reason)

    def _drop_request(
        self,
        m: Message,
        out: list[Action],
        sid: Any,
        reason: str,
        message: str,
        data: Any = None,
    ) -> bool:
        """Drops an agent request still in flight, answering the agent if it is there.

        Returns:
            False when ``m`` is not such a request (nothing done).
        """
        if m.kind is not _REQUEST or self.inflight.pop(_AGENT, m.id) is None:
            return False
        self.ledger.audit(
            out,
            AuditEvent.REQUEST_DROPPED,
            _AGENT,
            sessionId=sid,
            method=m.method,
            id=m.id,
            reason=reason,
        )
        if self.inflight.gone[_AGENT] is None:
            self.ledger.answer(out, _AGENT, m.id, INVALID_REQUEST, message, data)
        else:
            self.n.dropped += 1
        return True

    def _hold(
        self, sid: str, m: Message, now: float, out: list[Action], stack: list[Iterator[Message]]
    ) -> None:
        first = sid not in self.hold
        evicted = self.hold.hold(sid, m, now)
        if first and sid in self.hold:
            self.ledger.audit(
                out,
                AuditEvent.HELD,
                _AGENT,
                sessionId=sid,
                method=m.method,
                id=m.id,
                reason="session not yet known to the client",
            )
        for ev in evicted:
            self.expire(ev, now, out, stack)

    def release(self, sid: str, now: float, out: list[Action], why: str) -> None:
        msgs = self.hold.take(sid)
        if msgs:
            self.ledger.audit(
                out, AuditEvent.RELEASED, _AGENT, sessionId=sid, count=len(msgs), reason=why
            )
            self.route_all(msgs, now, out)

    def expire(
        self,
        ev: Evicted,
        now: float,
        out: list[Action],
        stack: list[Iterator[Message]] | None = None,
    ) -> None:
        policy = self.ctx.config.hold.on_expire
        why = f"{ev.reason}; {policy}"
        if ev.reason == "agent_exited" and self.inflight.gone[_CLIENT] is not None:
            policy = "drop"
            why = f"{ev.reason}; drop (the client is gone too)"
        self.ledger.audit(
            out,
            AuditEvent.HOLD_EXPIRED,
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
                self.route_all(ev.messages + later, now, out)
            return
        for m in ev.messages:
            if not self._drop_request(
                m,
                out,
                ev.session_id,
                f"held: {ev.reason}",
                f"acp-proxy: session {ev.session_id!r} was never announced to the client "
                f"({ev.reason}); request dropped",
                {"sessionId": ev.session_id, "reason": ev.reason},
            ):  # a notification, or a request already answered when the client left
                event = (
                    AuditEvent.REQUEST_DROPPED
                    if m.kind is _REQUEST
                    else AuditEvent.NOTIFICATION_DROPPED
                )
                self.ledger.drop(out, m, _AGENT, event, f"held: {ev.reason}")

    def deliver(self, m: Message, now: float, out: list[Action]) -> list[Message]:
        """Forwards one agent message the client can know about; returns what it releases.

        A request a gate decides (:data:`_REQUEST_READERS`: the budget and
        permission gates, the elicitation gate) is decided here (on arrival,
        or on release from the hold buffer): the proxy may answer it instead.
        A ``$/cancel_request`` for a request the proxy answered is dropped. A
        ``session/update`` is read by the reader of its kind
        (:data:`_UPDATE_READERS`), which may drop it or release held traffic.
        """
        method = m.method
        if m.kind is _REQUEST:
            decide = _REQUEST_READERS.get(method)  # type: ignore[arg-type]
            if decide is not None and decide(self, m, now, out):
                return []
        elif (
            method == CANCEL_REQUEST
            and self.gate.answered
            and self.gate.cancel_for_answered(m, out)
        ):
            return []
        if method == "session/update":
            p = m.params
            upd = p.get("update") if p is not None else None
            if type(upd) is dict:
                su = upd.get("sessionUpdate")
                # a kind that is not a string is none the engine acts on (nor hashable)
                read = _UPDATE_READERS.get(su) if type(su) is str else None
                if read is not None:
                    assert p is not None
                    released = read(self, m, p, upd, now, out)
                    if released is not None:
                        return released
        self.ledger.forward(out, _CLIENT, m.raw)
        return []

    # --- agent requests a gate decides (_REQUEST_READERS); True: answered here

    def _permission_request(self, m: Message, now: float, out: list[Action]) -> bool:
        """A ``session/request_permission``: the repeat budget, then the rules."""
        if self.budgets.active and self.budgets.permission(m, out):
            return True
        return self._governed_request(m, now, out)

    def _governed_request(self, m: Message, now: float, out: list[Action]) -> bool:
        """An ``fs/*`` or ``terminal/create`` request (and a permission request): the rules."""
        return self.gate.governs(m.method) and self.gate.decide(m, now, out)

    def _elicitation_request(self, m: Message, now: float, out: list[Action]) -> bool:
        """An ``elicitation/create``: ``[elicitation]``."""
        return self.elicitation.decide(m, out)

    # --- session/update readers (_UPDATE_READERS); a list: what to return instead
    # of forwarding (the message was dropped, or it released held traffic)

    def _read_subagent_update(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        self._read_opted_in(m, p, upd, now, out)
        return self._subagent_update(m, upd, now, out)

    def _read_opted_in(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        """An update a v1 client must have opted into (``clientCapabilities.subagents``)."""
        if self.negotiated.protocol_version == 1:
            self._v1_opt_in(m, upd["sessionUpdate"], out)
        return None

    def _read_tool_call(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        if self.budgets.watches_tools:
            self.budgets.tool_call(p.get("sessionId"), out)
        return self._read_tool_call_update(m, p, upd, now, out)

    def _read_tool_call_update(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        if self.gate.remembers_tools:
            self.gate.remember_tool(p.get("sessionId"), upd)
        return None

    def _read_usage_update(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        if self.budgets.watches_usage:
            self.budgets.usage(p.get("sessionId"), upd, out)
        return None

    def _read_state_update(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message] | None:
        """A state report: counted by a turn budget, dropped when it repeats the last one."""
        sid = p.get("sessionId")
        if self.budgets.watches_turns:
            self.budgets.state_report(sid, upd)
        if not self._dedup_on or type(sid) is not str:
            return None
        channel = ("self", sid)
        if VIEW_KEY in upd:
            # A large frame (a view keeps the whole frame alive): delivered,
            # never remembered, so never judged a duplicate.
            self.dedup.delivered(channel, None)
            return None
        dedup = self.dedup
        snapshot = None
        # the frame that delivered the last report, byte for byte: a duplicate
        # without building or comparing a snapshot (StateDedup.repeats: exact)
        if not dedup.repeats(channel, m.raw):
            snapshot = [upd, p.get("_meta"), m.body.get("_meta")]
        if snapshot is None or dedup.is_duplicate(channel, snapshot):
            self.n.duplicates_removed += 1
            self.ledger.drop(out, m, _AGENT, AuditEvent.DUPLICATE_DROPPED, _REPEATS_REPORT)
            return []
        dedup.delivered(channel, snapshot, footprint(snapshot, self._dedup_cap), m.raw)
        return None

    def _v1_opt_in(self, m: Message, su: str, out: list[Action]) -> None:
        """Audits a subagent update sent to a v1 client that did not opt in
        (forwarded all the same; the registry still tracks it)."""
        if self.negotiated.client_subagents:
            return
        self.ledger.audit(
            out,
            AuditEvent.PROTOCOL_VIOLATION,
            _AGENT,
            sessionId=m.session_id,
            method=m.method,
            reason=f"{su} sent to a protocol v1 client without clientCapabilities.subagents",
        )

    def _subagent_update(
        self, m: Message, upd: dict[str, Any], now: float, out: list[Action]
    ) -> list[Message]:
        """A ``subagent_update``: the registry patched, then what its outcome does
        (:data:`_OUTCOMES`); returns the held traffic an announcement releases."""
        p = m.params
        assert p is not None
        parent = p.get("sessionId")
        view = self._view(upd)
        if view is None or type(parent) is not str:
            self.ledger.audit(
                out,
                AuditEvent.INVALID_SUBAGENT_UPDATE,
                _AGENT,
                sessionId=parent,
                method=m.method,
                reason="subagent_update without a string sessionId",
            )
            self.ledger.forward(out, _CLIENT, m.raw)
            return []
        cid = view.session_id
        reg = self.registry
        existing = reg.child(cid)
        mirror = self._mirror(m, p, upd, view)
        if (
            existing is not None
            and self._dedup_on
            and type(mirror) is list
            and VIEW_KEY not in upd  # a large frame is never cut: never a duplicate
            and (
                self.dedup.repeats(("mirror", cid), m.raw)  # exact: StateDedup.repeats
                or self.dedup.is_duplicate(("mirror", cid), mirror)
            )
        ):
            return self._duplicate_mirror(m, upd, view, parent, existing, now, out)
        outcome = reg.apply(parent, view, now)
        if reg.truncated_last:
            self.ledger.audit(
                out,
                AuditEvent.REGISTRY_LIMIT,
                _AGENT,
                sessionId=cid,
                parentSessionId=parent,
                reason="tracked fields over limits.max_child_bytes / max_registry_bytes: "
                "only capabilities kept (none if they alone are over)",
            )
        return _OUTCOMES[outcome](self, m, cid, parent, mirror, out)

    def _view(self, upd: dict[str, Any]) -> SubagentUpdate | None:
        """:func:`~acp_proxy.core.session.schema.view_subagent_update` of ``upd``; the
        last one is kept with the object it read, and given again for that same
        object (a line repeated byte for byte is one parsed message:
        :class:`~acp_proxy.core.wire.memo.LineMemo`). Exact: a view is a function
        of the update, which nothing changes in place, and the reference kept
        stops its id from being reused."""
        last = self._last_view
        if last is not None and last[0] is upd:
            return last[1]
        view = view_subagent_update(upd)
        # a large frame's update holds the whole frame's bytes: never kept
        self._last_view = None if VIEW_KEY in upd else (upd, view)
        return view

    def _mirror(
        self, m: Message, p: dict[str, Any], upd: dict[str, Any], view: SubagentUpdate
    ) -> _Mirror:
        """What a ``subagent_update``'s ``state`` mirror is compared by: ``UNSET``
        without a ``state`` member, ``None`` for a null state. A mirror that differs
        only in _meta (anywhere in the message) is news. An omitted update._meta is
        a patch meaning "unchanged": the last one stands."""
        if view.state is None or view.state is UNSET:
            return view.state
        if "_meta" in upd:
            umeta = upd["_meta"]
        else:
            last = self.dedup.last(("mirror", view.session_id))
            umeta = last[1] if type(last) is list else None
        return [view.state, umeta, p.get("_meta"), m.body.get("_meta")]

    # --- what a subagent_update's registry outcome does (_OUTCOMES); ``mirror``:
    # the state mirror to remember (:meth:`_mirror`)

    def _refused_child(
        self, m: Message, cid: str, parent: str, mirror: _Mirror, out: list[Action]
    ) -> list[Message]:
        self.registry.deny(cid)  # fail closed: mutations naming it are refused
        limits = self.ctx.limits
        self.ledger.drop(
            out,
            m,
            _AGENT,
            AuditEvent.NOTIFICATION_DROPPED,
            f"limits.max_children ({limits.max_children}) or "
            f"limits.max_registry_bytes ({limits.max_registry_bytes}) or nesting deeper "
            f"than {MAX_DEPTH}",
        )
        return []

    def _invalid_child(
        self, m: Message, cid: str, parent: str, mirror: _Mirror, out: list[Action]
    ) -> list[Message]:
        self.registry.deny(cid)  # fail closed: mutations naming it are refused
        self.ledger.audit(
            out,
            AuditEvent.INVALID_SUBAGENT_UPDATE,
            _AGENT,
            sessionId=cid,
            parentSessionId=parent,
            reason="names the parent itself or an ancestor; mutations naming it are refused",
        )
        self.ledger.forward(out, _CLIENT, m.raw)
        return []

    def _accepted(self, m: Message, cid: str, mirror: _Mirror, out: list[Action]) -> Child:
        """The registry took the update: its mirror remembered, the message forwarded."""
        if self._dedup_on and mirror is not UNSET:
            self.dedup.delivered(("mirror", cid), mirror, footprint(mirror, self._dedup_cap), m.raw)
        child = self.registry.child(cid)
        assert child is not None
        self.ledger.forward(out, _CLIENT, m.raw)
        return child

    def _updated_child(
        self, m: Message, cid: str, parent: str, mirror: _Mirror, out: list[Action]
    ) -> list[Message]:
        child = self._accepted(m, cid, mirror, out)
        self.ledger.audit(
            out, AuditEvent.CHILD_UPDATED, _AGENT, sessionId=cid, parentSessionId=child.parent_id
        )
        self._audit_restored(cid, child.parent_id, out)
        return []

    def _conflicting_child(
        self, m: Message, cid: str, parent: str, mirror: _Mirror, out: list[Action]
    ) -> list[Message]:
        child = self._accepted(m, cid, mirror, out)
        self.ledger.audit(
            out,
            AuditEvent.REGISTRY_CONFLICT,
            _AGENT,
            sessionId=cid,
            parentSessionId=parent,
            reason="announced as a child, but known as an ordinary or provisional "
            "session; enforced as a child",
        )
        return self._announce(cid, parent, child, out)

    def _announced_child(
        self, m: Message, cid: str, parent: str, mirror: _Mirror, out: list[Action]
    ) -> list[Message]:
        return self._announce(cid, parent, self._accepted(m, cid, mirror, out), out)

    def _announce(self, cid: str, parent: str, child: Child, out: list[Action]) -> list[Message]:
        """A new child: audited and reported; the traffic held for it is released."""
        self.ledger.audit(
            out, AuditEvent.CHILD_ANNOUNCED, _AGENT, sessionId=cid, parentSessionId=parent
        )
        grants = ", ".join(sorted(child.capabilities or ())) or "none"
        self.ledger.info(
            out, "child announced", f"child {cid!r} announced under {parent!r}, grants: {grants}"
        )
        msgs = self.hold.take(cid)
        if msgs:
            self.ledger.audit(
                out, AuditEvent.RELEASED, _AGENT, sessionId=cid, count=len(msgs), reason="announced"
            )
        return msgs

    def _audit_restored(self, cid: str, parent_id: str, out: list[Action]) -> None:
        """Audits the end of a child's revocation, if the last registry update ended one."""
        if self.registry.restored_last:
            self.ledger.audit(
                out,
                AuditEvent.GRANTS_RESTORED,
                _AGENT,
                sessionId=cid,
                parentSessionId=parent_id,
                reason="revocation ended: re-announced after its parent's load / resume; "
                "its current capabilities apply",
            )

    def _duplicate_mirror(
        self,
        m: Message,
        upd: dict[str, Any],
        view: SubagentUpdate,
        parent: str,
        child: Child,
        now: float,
        out: list[Action],
    ) -> list[Message]:
        """A ``subagent_update`` whose ``state`` repeats the child's last mirror
        (``view``: its view; ``child``: the child it names): dropped when nothing
        else in it changes anything, else forwarded without its ``state`` member
        (only those bytes cut)."""
        p = m.params
        assert p is not None
        reg = self.registry
        cid = view.session_id
        parent_id = child.parent_id
        changes = reg.would_change(view)
        only_state = (
            not changes
            and not view.malformed
            and (child.fresh or view.capabilities is UNSET or reg.in_history(child.parent_id))
            and upd.keys() <= _SUBAGENT_KEYS
            and p.keys() <= {"sessionId", "update"}
            and m.body.keys() <= {"jsonrpc", "method", "params"}
        )
        reg.apply(parent, view, now, changes)
        self._audit_restored(cid, parent_id, out)
        if only_state:
            self.n.duplicates_removed += 1
            self.ledger.drop(
                out,
                m,
                _AGENT,
                AuditEvent.DUPLICATE_DROPPED,
                "repeats the child's last state mirror",
            )
            return []
        data = without_member(m.raw, ("params", "update", "state"))
        if data is None:
            data = m.raw
        else:
            self.n.duplicates_removed += 1
            self.ledger.audit(
                out,
                AuditEvent.DUPLICATE_DROPPED,
                _AGENT,
                sessionId=cid,
                parentSessionId=parent,
                method=m.method,
                reason="state field removed: repeats the child's last state mirror",
            )
        self.ledger.audit(
            out, AuditEvent.CHILD_UPDATED, _AGENT, sessionId=cid, parentSessionId=parent_id
        )
        self.ledger.forward(out, _CLIENT, data)
        return []


_RequestReader = Callable[[AgentDirection, Message, float, list[Action]], bool]
_UpdateReader = Callable[
    [AgentDirection, Message, dict[str, Any], dict[str, Any], float, list[Action]],
    "list[Message] | None",
]

#: Agent request method -> the gates that decide it on delivery (True: answered here).
_REQUEST_READERS: dict[str, _RequestReader] = {
    **dict.fromkeys(PERMISSION_METHODS, AgentDirection._governed_request),
    "session/request_permission": AgentDirection._permission_request,
    ELICITATION_CREATE: AgentDirection._elicitation_request,
}

#: ``sessionUpdate`` kind -> its reader (kinds not here are forwarded as they are).
#: ``subagent_update`` and ``session_message`` are the updates a v1 client must
#: have opted into (``clientCapabilities.subagents``).
_UPDATE_READERS: dict[str, _UpdateReader] = {
    "subagent_update": AgentDirection._read_subagent_update,
    "session_message": AgentDirection._read_opted_in,
    "tool_call": AgentDirection._read_tool_call,
    "tool_call_update": AgentDirection._read_tool_call_update,
    "usage_update": AgentDirection._read_usage_update,
    "state_update": AgentDirection._read_state_update,
}

_OutcomeReader = Callable[[AgentDirection, Message, str, str, _Mirror, list[Action]], list[Message]]

#: What each registry outcome of a ``subagent_update`` does: refused and invalid
#: updates deny the child (fail closed); the rest forward it and audit.
_OUTCOMES: dict[UpdateOutcome, _OutcomeReader] = {
    UpdateOutcome.REFUSED: AgentDirection._refused_child,
    UpdateOutcome.INVALID: AgentDirection._invalid_child,
    UpdateOutcome.UPDATED: AgentDirection._updated_child,
    UpdateOutcome.UNCHANGED: AgentDirection._updated_child,
    UpdateOutcome.CONFLICT: AgentDirection._conflicting_child,
    UpdateOutcome.ANNOUNCED: AgentDirection._announced_child,
}


_Settle = Callable[[AgentDirection, Message, str, Any, Any, float, list[Action]], None]

#: Client request method -> what the agent's answer to it settles (the rest settle
#: nothing beyond the request in flight).
_SETTLES: dict[str, _Settle] = {
    "session/load": AgentDirection._settle_open,
    "session/resume": AgentDirection._settle_open,
    "session/close": AgentDirection._settle_close,
    "session/new": AgentDirection._settle_create,
    "session/fork": AgentDirection._settle_create,
    "initialize": AgentDirection._settle_initialize,
}
