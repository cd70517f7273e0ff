"""The engine's refusals: one table keyed by the wire's verdict (docs/design.md section 2).

Every frame whose :class:`~acp_proxy.core.wire.verdict.Verdict` is not
``OK`` is refused by its row of :data:`REFUSALS`: the JSON-RPC error code
the requester is answered with, how the id is echoed, the counter it adds
to, the audit event of an answered request and of a dropped notification,
and what happens to an agent frame that is not answered. :func:`refuse`,
:func:`refuse_batch` and :func:`refuse_oversize` read the table; nothing
else in the engine decides how a refusal is spelled.

A refusal answers under the request's own id whenever it can be read
(:func:`~acp_proxy.core.wire.jsonrpc.reply_id`: its bytes, spelled as they
came); ``null`` only when it cannot be read unambiguously, or its type is
not one JSON-RPC allows.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, NamedTuple

from acp_proxy.core.actions import Action, AuditEvent, Peer, Report, Send
from acp_proxy.core.wire import reasons
from acp_proxy.core.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Kind,
    Message,
    RawId,
    error_frame,
    reply_id,
)
from acp_proxy.core.wire.verdict import Verdict

if TYPE_CHECKING:
    from acp_proxy.core.engine.agent import AgentDirection
    from acp_proxy.core.engine.ledger import Ledger

__all__ = ["REFUSALS", "AgentSide", "Echo", "Refusal", "refuse", "refuse_batch", "refuse_oversize"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE
_ERROR_RESPONSE = Kind.ERROR_RESPONSE


class Echo(enum.Enum):
    """How a refusal echoes the id, and so which frames are answered."""

    #: the id's bytes when they can be read (``reply_id``; toward the agent any type
    #: but ``null``), else ``null``: a client's frame is always answered, an agent's
    #: only when its id can be read
    BYTES = "bytes"
    #: the tracked id of a request; only requests are answered
    TRACKED = "tracked"
    #: as ``TRACKED``, but ``null`` when the ``id`` key itself repeats
    TRACKED_UNLESS_REPEATED = "tracked unless repeated"
    #: ``null`` for a client's frame; an agent's requests inside it under their ids
    NULL = "null"
    #: the id the framer read from the message's first bytes, ``null`` when it could not
    PREFIX = "prefix"


class AgentSide(enum.Enum):
    """What happens to an agent frame the refusal does not answer."""

    #: dropped with an audit record
    DROP = "drop"
    #: a warning for the log, then dropped with an audit record
    WARN_AND_DROP = "warn and drop"
    #: the agent direction's refusal (a request in flight ended, a warning, dropped)
    REFUSE = "refuse"
    #: every element counted and dropped, one audit record for the batch
    COUNT_ELEMENTS = "count elements"


class Refusal(NamedTuple):
    """One row of :data:`REFUSALS`.

    Attributes:
        code: the JSON-RPC error code of the answer (docs/protocol.md section 6).
        echo: how the id is echoed (:class:`Echo`).
        counter: the :class:`~acp_proxy.core.engine.counters.Counters` field the
            refusal adds one to, or ``None``.
        request_event: the audit event of an answered frame.
        notification_event: the audit event of a dropped notification (other
            frames that are not answered: ``invalid_message``).
        agent: what happens to an agent frame that is not answered.
        prefix: what the error message starts with, before the reason.
        audit_method: the audit record of an answer names the method.
    """

    code: int
    echo: Echo
    counter: str | None
    request_event: AuditEvent
    notification_event: AuditEvent
    agent: AgentSide
    prefix: str = "acp-proxy: "
    audit_method: bool = False


_INVALID_MESSAGE = AuditEvent.INVALID_MESSAGE
_UNREADABLE = Refusal(
    INVALID_REQUEST, Echo.BYTES, "invalid", _INVALID_MESSAGE, _INVALID_MESSAGE,
    AgentSide.WARN_AND_DROP,
)  # fmt: skip

#: The refusal of each verdict but ``OK``.
REFUSALS: dict[Verdict, Refusal] = {
    Verdict.OVERSIZE: Refusal(
        INVALID_REQUEST, Echo.PREFIX, "oversize", AuditEvent.OVERSIZE_MESSAGE,
        AuditEvent.OVERSIZE_MESSAGE, AgentSide.DROP,
    ),
    Verdict.TOO_DEEP: _UNREADABLE,
    Verdict.NOT_JSON: _UNREADABLE._replace(code=PARSE_ERROR),
    Verdict.LONG_INTEGER: _UNREADABLE,
    Verdict.TOO_DENSE: _UNREADABLE,
    Verdict.INVALID: _UNREADABLE,
    Verdict.BATCH: Refusal(
        INVALID_REQUEST, Echo.NULL, None, _INVALID_MESSAGE, AuditEvent.BATCH_REFUSED,
        AgentSide.COUNT_ELEMENTS,
    ),
    Verdict.BAD_SESSION_ID: Refusal(
        INVALID_PARAMS, Echo.TRACKED, None, _INVALID_MESSAGE, _INVALID_MESSAGE,
        AgentSide.REFUSE, audit_method=True,
    ),
    Verdict.AMBIGUOUS: Refusal(
        INVALID_REQUEST, Echo.TRACKED_UNLESS_REPEATED, None, _INVALID_MESSAGE,
        AuditEvent.NOTIFICATION_DROPPED, AgentSide.DROP, "acp-proxy: ambiguous message: ",
        audit_method=True,
    ),
}  # fmt: skip


def _count(ledger: Ledger, row: Refusal) -> None:
    if row.counter is not None:
        n = ledger.n
        setattr(n, row.counter, getattr(n, row.counter) + 1)


def _echo(row: Refusal, source: Peer, m: Message) -> tuple[Any, bool]:
    """The id ``m`` is answered under, and whether it is answered at all."""
    if row.echo is Echo.BYTES:
        rid = reply_id(m, any_type=source is _AGENT)
        return rid, source is _CLIENT or rid is not None
    if row.echo is Echo.TRACKED_UNLESS_REPEATED:
        body = m.body
        repeated = isinstance(body, dict) and "id" in getattr(body, "dups", ())
        return (None if repeated else m.id), m.kind is _REQUEST
    return m.id, m.kind is _REQUEST


def refuse(
    ledger: Ledger, agent: AgentDirection, source: Peer, m: Message, out: list[Action]
) -> None:
    """Refuses the frame ``m`` from ``source`` by the row of its verdict (not ``OK``,
    ``BATCH`` or ``OVERSIZE``): answered under its id, or dropped, audited either way."""
    row = REFUSALS[m.verdict]
    _count(ledger, row)
    reason = m.reason or m.verdict.name
    rid, answered = _echo(row, source, m)
    answer = m.kind is _RESPONSE or m.kind is _ERROR_RESPONSE
    if source is _CLIENT and answer and m.id is not None:
        _end_agent_request(ledger, agent, m, reason, out)
    if answered:
        if source is _AGENT and row.echo is Echo.BYTES:
            out.append(Report("warning", f"agent sent an invalid request, refused: {reason}"))
        fields: dict[str, Any] = {"id": audit_id(rid)}
        if row.audit_method:
            fields["method"] = m.method
        ledger.audit(out, row.request_event, source, **fields, reason=reason)
        ledger.answer(out, source, rid, row.code, f"{row.prefix}{reason}")
        return
    if source is _AGENT:
        if m.id is not None and (m.kind is _RESPONSE or m.kind is _ERROR_RESPONSE):
            _end_client_request(ledger, m.id, reason, out)
        if row.agent is AgentSide.REFUSE:
            agent.refuse(m, out, reason)
            return
        if row.agent is AgentSide.WARN_AND_DROP:
            if m.verdict is Verdict.NOT_JSON:
                ledger.n.non_json_agent_lines += 1
                preview = m.raw[:200].decode("utf-8", "replace")
                text = f"agent stdout line is not JSON, dropped: {preview!r}"
            else:
                text = f"agent sent invalid JSON-RPC, dropped: {reason}"
            out.append(Report("warning", text))
    event = row.notification_event if m.kind is _NOTIFICATION else _INVALID_MESSAGE
    ledger.drop(out, m, source, event, reason)


def _end_client_request(ledger: Ledger, rid: Any, reason: str, out: list[Action]) -> None:
    """A refused agent answer to client request ``rid`` in flight: the request is answered
    ``-32603`` under its id (the client would wait for the agent's exit); the answer itself
    is dropped by the caller. Nothing when ``rid`` is not in flight."""
    entry = ledger.inflight.pop(_CLIENT, rid)
    if entry is None:
        return
    method, sid, _cost = entry
    text = f"acp-proxy: the agent's answer to {method} was refused: {reason}"
    data = {"method": method, "sessionId": sid, "reason": reason}
    out.append(Send(_CLIENT, error_frame(rid, INTERNAL_ERROR, text, data)))


def _end_agent_request(
    ledger: Ledger, agent: AgentDirection, m: Message, reason: str, out: list[Action]
) -> None:
    """A refused client answer to agent request ``m.id`` in flight: the request is answered
    ``-32603`` under its id (the agent would wait for the client forever); the answer itself
    is dropped by the caller. Nothing when the id is repeated in the frame (which one the
    client meant cannot be read) or not in flight; when an ask of it ran out, the agent
    was answered already and the request only ends."""
    body = m.body
    if isinstance(body, dict) and "id" in getattr(body, "dups", ()):
        return
    rid = m.id
    entry = ledger.inflight.pop(_AGENT, rid)
    if entry is None:
        return
    if agent.gate.client_answer_refused(rid):
        return
    method, sid, _cost = entry
    text = f"acp-proxy: the client's answer to {method} was refused: {reason}"
    data = {"method": method, "sessionId": sid, "reason": reason}
    out.append(Send(_AGENT, error_frame(rid, INTERNAL_ERROR, text, data)))


def refuse_batch(ledger: Ledger, source: Peer, m: Message, out: list[Action]) -> None:
    """Refuses a JSON-RPC batch whole, as both SDKs do (docs/protocol.md section 4,
    "Batches"): nothing inside it reaches the other peer.

    A client's batch is one message answered with one ``-32600`` (id
    ``null``). An agent's batch counts each element: a request whose id
    can be read is answered ``-32600`` to the agent, the rest are dropped;
    one audit record covers the batch.
    """
    row = REFUSALS[Verdict.BATCH]
    reason = reasons.BATCH
    n = ledger.n
    if source is _CLIENT:
        n.accepted += 1
        ledger.audit(out, row.request_event, source, id=None, reason=reason)
        ledger.answer(out, _CLIENT, None, row.code, f"{row.prefix}{reason}")
        return
    items = m.items  # the elements that may be requests; the others are not read
    count = max(1, m.elements or len(items))
    n.accepted += count
    answered = 0
    for item in items:
        if item.kind is _REQUEST and item.id is not None:
            answered += 1
            ledger.answer(out, _AGENT, item.id, row.code, f"{row.prefix}{reason}")
    n.dropped += count - answered
    ledger.audit(
        out,
        row.notification_event,
        source,
        count=count,
        answered=answered,
        reason=f"{reason}: {count} elements refused",
    )
    out.append(Report("warning", f"agent sent a JSON-RPC batch, refused: {reason}"))


def refuse_oversize(
    ledger: Ledger,
    pending: Collection[Any],
    source: Peer,
    size_bytes: int,
    limit: int,
    complete: bool,
    rid: Any,
) -> list[Action]:
    """Refuses a message the framer skipped for exceeding ``max_message_bytes`` (``limit``).

    A client's oversize message is answered with ``-32600``, with its id
    ``rid`` when the shell could read it from the message's start
    (:func:`~acp_proxy.core.wire.jsonscan.request_id_from_prefix`; an id
    the proxy does not track as its bytes), else ``null`` (also when
    ``rid`` is in flight, among the client's ``pending`` ids: a later ``id``
    could differ); an agent's request whose id can be read is answered
    ``-32600`` under it, the rest is dropped. All are audited.
    """
    row = REFUSALS[Verdict.OVERSIZE]
    out: list[Action] = []
    ledger.n.accepted += 1
    _count(ledger, row)
    reason = f"message of {size_bytes} bytes exceeds limits.max_message_bytes ({limit})"
    ledger.audit(out, row.request_event, source, reason=reason)
    out.append(Report("warning", f"{source.value} sent an oversize message: {reason}"))
    if source is _CLIENT and complete:
        if rid in pending:
            rid = None
        ledger.answer(out, _CLIENT, rid, row.code, f"{row.prefix}{reason}")
    elif source is _AGENT and complete and rid is not None:
        # an agent request: answered under its id's bytes, or it would wait forever
        ledger.answer(out, _AGENT, rid, row.code, f"{row.prefix}{reason}")
    else:
        ledger.n.dropped += 1
    return out


def audit_id(rid: Any) -> Any:
    """An id as an audit record keeps it: a :class:`~acp_proxy.core.wire.jsonrpc.RawId`
    as its JSON text."""
    return rid.text if type(rid) is RawId else rid
