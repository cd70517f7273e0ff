"""The ledger: every outcome of a message, counted and audited in one place.

docs/design.md section 2 (the accounting invariant). Each message the engine accepts ends
through exactly one of :meth:`Ledger.forward`, :meth:`Ledger.answer` (an error),
:meth:`Ledger.reply` (the proxy's own response) or :meth:`Ledger.drop` (or stays held), so
``accepted == forwarded + answered + dropped + held`` always. The ledger also
tracks requests in flight (:class:`~acp_proxy.core.engine.inflight.InFlight`),
because whether a refusal may be answered depends on them: an id still in
flight gets one answer, the other peer's.
"""

from __future__ import annotations

from typing import Any

from acp_proxy.core.actions import Action, Audit, AuditEvent, Peer, Report, Send
from acp_proxy.core.engine.counters import Counters
from acp_proxy.core.engine.inflight import InFlight, Pending
from acp_proxy.core.wire.jsonrpc import INVALID_REQUEST, Message, error_frame

__all__ = ["Ledger"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_AGENT_TO_CLIENT = _AGENT.direction
_CLIENT_TO_AGENT = _CLIENT.direction


class Ledger:
    """Outcomes, counters and requests in flight of one connection.

    Args:
        counters: the connection's counters (incremented here).
        inflight: the connection's requests in flight.
        include_content: copy a dropped message's text into its audit record
            (``audit.include_content``).
        label: what the life-cycle lines (:meth:`info`) start with, e.g.
            ``"connection 1"`` (nothing when empty).
    """

    def __init__(
        self, counters: Counters, inflight: InFlight, include_content: bool, label: str = ""
    ) -> None:
        self.n = counters
        self.inflight = inflight
        self.include_content = include_content
        self.label = label
        #: rule or budget name -> decisions that would have blocked (``policy.mode = "observe"``)
        self.would_block: dict[str, int] = {}
        #: messages the proxy itself sent, with why, when something reads them (the
        #: trace sets a list; ``None``: not kept)
        self.originated: list[tuple[Peer, bytes, str]] | None = None

    def audit(
        self, out: list[Action], event: AuditEvent, source: Peer | None, **fields: Any
    ) -> None:
        """Appends one audit record (``source`` gives its direction)."""
        out.append(Audit(event, source.direction if source else None, fields))

    def would_have_blocked(self, fields: dict[str, Any], rule: str) -> None:
        """Marks an audit record's ``fields`` as a decision observe mode did not carry out
        (``would_block``, ``observed``) and counts it for ``rule`` (``policy.mode``)."""
        fields["would_block"] = True
        fields["observed"] = True
        self.would_block[rule] = self.would_block.get(rule, 0) + 1

    def info(self, out: list[Action], kind: str, text: str) -> None:
        """Appends a life-cycle line for the log at ``info`` (a few per session, never
        per message: initialize, a session created, a child announced, a peer gone)."""
        out.append(Report("info", f"{self.label}: {text}" if self.label else text, kind))

    def forward(self, out: list[Action], to: Peer, data: bytes) -> None:
        """Delivers one message to ``to``."""
        self.n.forwarded += 1
        out.append(Send(to, data))

    def originate(self, out: list[Action], to: Peer, data: bytes, why: str) -> None:
        """Sends a message of the proxy's own (no peer's message: outside the accounting),
        e.g. a budget's ``session/cancel``."""
        out.append(Send(to, data))
        if self.originated is not None:
            self.originated.append((to, data, why))

    def answer(
        self, out: list[Action], to: Peer, rid: Any, code: int, message: str, data: Any = None
    ) -> None:
        """Answers a message of ``to`` with an error; when ``rid`` is an id of ``to``'s still
        in flight, drops it instead (audited): that id gets one answer, the other peer's."""
        if rid is not None and rid in self.inflight.pending[to]:
            self.n.dropped += 1
            self.audit(
                out,
                AuditEvent.REQUEST_DROPPED,
                to,
                id=rid,
                reason=f"refused ({message}); its id is already in flight, so not answered",
            )
            return
        self.n.answered += 1
        out.append(Send(to, error_frame(rid, code, message, data)))

    def reply(self, out: list[Action], to: Peer, data: bytes) -> None:
        """Answers a request of ``to`` with the proxy's own response ``data`` (a result,
        or an error built by the caller); the request counts as answered. The caller
        has taken it out of flight."""
        self.n.answered += 1
        out.append(Send(to, data))

    def drop(
        self, out: list[Action], m: Message, source: Peer, event: AuditEvent, reason: str
    ) -> None:
        """Drops ``m`` with an audit record ``event`` giving ``reason``."""
        self.n.dropped += 1
        p = m.params  # m.session_id, written out (a drop of a repeat is a common path)
        sid = p.get("sessionId") if p is not None else None
        fields: dict[str, Any] = {
            "sessionId": sid if type(sid) is str else None,
            "method": m.method,
            "id": m.id,
            "reason": reason,
        }
        if self.include_content:
            fields["content"] = m.raw.decode("utf-8", "replace")
        # as audit() builds it (source.direction written out), one dict and two calls less
        out.append(Audit(event, _AGENT_TO_CLIENT if source is _AGENT else _CLIENT_TO_AGENT, fields))

    def unsettled(self, held: int) -> int:
        """Messages accepted but not yet forwarded, answered, dropped or held
        (``held`` messages in the hold buffer)."""
        n = self.n
        return n.accepted - n.forwarded - n.answered - n.dropped - held

    def track(self, requester: Peer, m: Message, out: list[Action]) -> bool:
        """Records request ``m`` in flight; answers or drops it and returns False if it cannot be.

        A request reusing an id already in flight is dropped unanswered (audited):
        any answer would be a second response to that id.
        """
        if m.id in self.inflight.pending[requester]:
            self.drop(
                out,
                m,
                requester,
                AuditEvent.REQUEST_DROPPED,
                f"request id {m.id!r} is already in flight (an answer would be its second)",
            )
            return False
        reason = self.inflight.add(requester, m.id, m.method or "", m.session_id)
        if reason is None:
            return True
        self.audit(
            out, AuditEvent.INVALID_MESSAGE, requester, id=m.id, method=m.method, reason=reason
        )
        self.answer(out, requester, m.id, INVALID_REQUEST, f"acp-proxy: {reason}")
        return False

    def settle(self, source: Peer, m: Message, out: list[Action]) -> Pending | None:
        """A response from ``source``: forwards it to the requester when it answers a
        request in flight (returning that request's entry), else drops it (audited).

        An error response with id ``null`` (to something unreadable) is passed on.
        """
        if m.malformed_error:
            self.n.malformed_errors += 1
        to = source.other
        if m.id is None:
            self.forward(out, to, m.raw)
            return None
        entry = self.inflight.pop(to, m.id)
        if entry is None:
            self.drop(
                out,
                m,
                source,
                AuditEvent.UNKNOWN_RESPONSE,
                f"no request with id {m.id!r} in flight",
            )
            return None
        self.forward(out, to, m.raw)
        return entry
