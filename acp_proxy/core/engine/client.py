"""The client direction: enforcement on child sessions (docs/protocol.md section 4).

A client request or notification naming a child session is refused here and
never reaches the agent unless it is a read or a mutation the child's
capabilities grant (an allowlist, :func:`~acp_proxy.core.session.policy.check_mutation`);
everything else is tracked and forwarded byte for byte. A client
``session/load`` / ``session/resume`` is the freshness boundary: the
session's descendants lose their grants until re-announced.
"""

from __future__ import annotations

from collections.abc import Callable

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer
from acp_proxy.core.engine.agent import AgentDirection
from acp_proxy.core.engine.context import EngineContext, EnginePart
from acp_proxy.core.engine.negotiated import peer_info, peer_name
from acp_proxy.core.session.policy import Rejection, check_mutation
from acp_proxy.core.session.workspace import (
    SESSION_DIRECTORY_METHODS,
    directories_outside,
    normalize_root,
)
from acp_proxy.core.wire.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, Kind, Message

__all__ = ["ClientDirection"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION

_OPENS_SESSION = frozenset({"session/load", "session/resume"})


class ClientDirection(EnginePart):
    """What :class:`~acp_proxy.core.engine.ProxyCore` does with client messages.

    Args:
        ctx: the engine context. Read here: the configuration (``enforcement``,
            the sandbox's workspace), the subagent registry (the freshness
            boundary starts here), the hold buffer, the duplicate state report
            filter, the ledger (outcomes, counters and requests in flight), what
            ``initialize`` negotiated, the permission gate (records workspaces;
            drops late answers to requests whose ask timed out), the budget gate
            (checks prompts; opens turns) and the admission gate (session requests).
        agent: the agent direction, which delivers what opening a session releases.
    """

    def __init__(self, ctx: EngineContext, agent: AgentDirection) -> None:
        super().__init__(ctx)
        self.agent = agent
        ctx.follow(self)

    def configure(self, config: Config) -> None:
        """Takes the ``enforcement`` section of ``config`` (:meth:`EngineContext.reconfigure`).

        Grants are checked per message against the child's current
        capabilities, so a narrower table applies to children already registered.
        """
        self._mutations = config.enforcement.child_mutations
        self._read_only = frozenset(config.enforcement.child_read_only)
        sandbox = config.sandbox
        #: the sandbox's workspace roots (absolute: the shell resolved them), or empty
        self._roots = tuple(normalize_root(r) for r in sandbox.workspace) if sandbox.enabled else ()

    def handle(self, m: Message, now: float, out: list[Action], budgeted: bool = False) -> None:
        """One classified client message (request, notification or response); ``budgeted``:
        a prompt the budget store allowed, checked again here but not counted again.

        A request or notification passes the checks of :data:`_CHECKS` in order
        (the first that refuses it, or holds it for the budget store, ends it),
        then is tracked and forwarded.
        """
        kind = m.kind
        if kind is _REQUEST or kind is _NOTIFICATION:
            if kind is _REQUEST and m.method == "initialize":
                self._client_initialize(m)
            for check in _CHECKS:
                if check(self, m, now, out, budgeted):
                    return
            self._go_on(m, now, out)
            return
        if self.gate.watching and self.gate.client_response(m, out):
            return
        self.ledger.settle(_CLIENT, m, out)

    # --- the checks of a client request or notification (_CHECKS); True: it was
    # refused, or waits for the budget store (ProxyCore.store_result)

    def _check_enforcement(self, m: Message, now: float, out: list[Action], budgeted: bool) -> bool:
        """``[enforcement]``: a message naming a child needs the child's grant."""
        method = m.method
        assert method is not None
        sid = m.session_id
        rejection = check_mutation(
            self.registry,
            self._mutations,
            method,
            sid,
            read_only=self._read_only,
            unestablished=sid is not None and self._unestablished(sid, method),
        )
        if rejection is None:
            return False
        self._reject(m, rejection, out)
        return True

    def _check_admission(self, m: Message, now: float, out: list[Action], budgeted: bool) -> bool:
        """``[admission]`` on session requests."""
        if m.kind is not _REQUEST:
            return False
        refusal = self.admission.decide(m)
        return refusal is not None and self.admission.refuse(m, refusal, out)

    def _check_workspace(self, m: Message, now: float, out: list[Action], budgeted: bool) -> bool:
        """The sandbox's workspace: a session request naming directories outside it."""
        if not self._roots or m.kind is not _REQUEST or m.method not in SESSION_DIRECTORY_METHODS:
            return False
        outside = directories_outside(m.params, self._roots)
        if not outside:
            return False
        self._refuse_outside(m, outside, out)
        return True

    def _check_budget(self, m: Message, now: float, out: list[Action], budgeted: bool) -> bool:
        """``[budgets]`` on a prompt not yet counted (refused, or sent to the store)."""
        return (
            m.method == "session/prompt"
            and m.kind is _REQUEST
            and not budgeted
            and self.budgets.watches_prompts
            and m.id not in self.inflight.pending[_CLIENT]
            and self.budgets.prompt(m, m.session_id, now, out)
        )

    def _refuse_workspace(self, m: Message, reason: str, out: list[Action]) -> None:
        """Answers a session/new | load | resume | fork whose workspace is over
        ``limits.max_workspace_bytes`` with an error under its id (audited)."""
        self.inflight.pop(_CLIENT, m.id)
        fields = {"sessionId": m.session_id, "method": m.method, "id": m.id, "reason": reason}
        self.ledger.audit(out, AuditEvent.REQUEST_REFUSED, _CLIENT, **fields)
        self.ledger.answer(
            out, _CLIENT, m.id, INVALID_PARAMS, f"acp-proxy: {m.method} refused: {reason}"
        )

    def _go_on(self, m: Message, now: float, out: list[Action]) -> None:
        """A client request or notification that passed enforcement and budgets: tracked
        and forwarded (or answered when the agent has gone)."""
        kind = m.kind
        method = m.method
        sid = m.session_id
        if kind is _REQUEST and not self.ledger.track(_CLIENT, m, out):
            return
        gone = self.inflight.gone[_AGENT]
        if gone is not None:
            if kind is _REQUEST:
                self.inflight.pop(_CLIENT, m.id)
                self.ledger.answer(out, _CLIENT, m.id, INTERNAL_ERROR, f"acp-proxy: {gone}")
            else:
                self.ledger.drop(out, m, _CLIENT, AuditEvent.NOTIFICATION_DROPPED, gone)
            return
        if kind is _REQUEST:
            refused = self.gate.client_request(m, sid)
            if refused is not None:
                self._refuse_workspace(m, refused, out)
                return
            if sid is not None and method in _OPENS_SESSION:
                self._open(sid, method, now, out)
            elif method == "session/prompt" and self.budgets.watches_turns:
                self.budgets.prompt_forwarded(m, sid, now)
        self.ledger.forward(out, _AGENT, m.raw)

    def _reject(self, m: Message, rejection: Rejection, out: list[Action]) -> None:
        """Refuses a client message naming a child: a request is answered, a
        notification dropped; both audited. A request whose id is already in
        flight is dropped unanswered: that id gets the agent's answer, only one."""
        self.n.rejected_mutations += 1
        child = self.registry.child(rejection.session_id)
        fields = {
            "sessionId": rejection.session_id,
            "parentSessionId": child.parent_id if child else None,
            "method": m.method,
            "id": m.id,
            "capability": rejection.capability,
            "reason": rejection.reason,
        }
        self.ledger.audit(out, AuditEvent.MUTATION_REJECTED, _CLIENT, **fields)
        if m.kind is _REQUEST and m.id not in self.inflight.pending[_CLIENT]:
            self.ledger.answer(
                out,
                _CLIENT,
                m.id,
                self.ctx.config.enforcement.reject_code,
                rejection.message,
                rejection.data,
            )
            return
        self.n.dropped += 1
        event = (
            AuditEvent.NOTIFICATION_DROPPED
            if m.kind is _NOTIFICATION
            else AuditEvent.REQUEST_DROPPED
        )
        if event is AuditEvent.REQUEST_DROPPED:
            fields["reason"] = f"{rejection.reason}; its id is already in flight"
        self.ledger.audit(out, event, _CLIENT, **fields)

    def _refuse_outside(self, m: Message, outside: list[str], out: list[Action]) -> None:
        """Answers a session request naming directories outside the sandbox's workspace
        (never forwarded: the agent could not work there), audited as ``request_refused``."""
        roots = list(self._roots)
        reason = (
            f"the sandbox confines the agent to the workspace {', '.join(roots)}; "
            f"{', '.join(outside)} is outside it"
        )
        self.ledger.audit(
            out,
            AuditEvent.REQUEST_REFUSED,
            _CLIENT,
            sessionId=m.session_id,
            method=m.method,
            id=m.id,
            reason=reason,
            workspace=roots,
            outside=outside,
        )
        message = (
            f"acp-proxy: {reason}: start the session in the workspace or widen [sandbox] workspace"
        )
        data = {"workspace": roots, "outside": outside}
        self.ledger.answer(out, _CLIENT, m.id, INVALID_PARAMS, message, data)

    def _client_initialize(self, m: Message) -> None:
        """Records whether the client opted into subagents (v1 ``clientCapabilities.subagents``)
        and its name."""
        p = m.params or {}
        caps = p.get("clientCapabilities")
        self.negotiated.client_subagents = (
            type(caps) is dict and type(caps.get("subagents")) is dict
        )
        self.negotiated.client_name = peer_name(peer_info(p, "clientInfo"))
        pv = p.get("protocolVersion")
        self.negotiated.client_protocol_version = pv if type(pv) is int else None

    def _open(self, sid: str, method: str, now: float, out: list[Action]) -> None:
        """A ``session/load`` / ``session/resume`` of ``sid`` goes to the agent: the
        freshness boundary (docs/protocol.md section 4) and a new dedup epoch."""
        reg = self.registry
        below = reg.descendants(sid)
        self.dedup.reset_session(sid, below)
        revoked = [cid for cid in below if reg.children[cid].fresh]
        if reg.begin_open(sid):
            self.agent.release(sid, now, out, "client opened the session")
        if revoked:
            self.ledger.audit(
                out,
                AuditEvent.GRANTS_REVOKED,
                _CLIENT,
                sessionId=sid,
                method=method,
                count=len(revoked),
                reason="descendants keep no mutation grant until re-announced after the response",
            )

    def _unestablished(self, sid: str, method: str) -> bool:
        """Named by the agent but neither created, loaded nor announced to the client.

        Held traffic of an id nobody announced does not stop the client from
        loading or resuming that id (which releases it).
        """
        reg = self.registry
        if sid in reg.provisional:
            return True
        if reg.is_known(sid):
            return False
        if self.hold.announces(sid):
            return True
        return sid in self.hold and method not in _OPENS_SESSION


_Check = Callable[[ClientDirection, Message, float, list[Action], bool], bool]

#: The checks a client request or notification passes, in order (the first
#: that returns True ends it).
_CHECKS: tuple[_Check, ...] = (
    ClientDirection._check_enforcement,
    ClientDirection._check_admission,
    ClientDirection._check_workspace,
    ClientDirection._check_budget,
)
