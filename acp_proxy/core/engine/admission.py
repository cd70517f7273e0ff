"""The admission gate: ``[admission]`` applied to the client's session requests (issue 26).

:mod:`~acp_proxy.core.session.admission` holds the rules; this part keeps what
one connection needs to apply them: the compiled policy (rebuilt by
:meth:`AdmissionGate.configure`, so a reload replaces it), the connection's
principal and whether it is remote (bound by the shell, :meth:`AdmissionGate.bind`),
and the resolver of directories the shell injects (the core's default is
lexical). A refused request is answered with a JSON-RPC error under its own
id naming the rule, never forwarded, and audited ``admission_refused``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer
from acp_proxy.core.session.admission import (
    ADMITTED_METHODS,
    AdmissionPolicy,
    Decision,
    Resolve,
    lexical_resolve,
)
from acp_proxy.core.wire.jsonrpc import Message
from acp_proxy.core.wire.jsonscan import bounded_members
from acp_proxy.core.wire.views import VIEW_KEY

if TYPE_CHECKING:
    from acp_proxy.core.engine.context import EngineContext

__all__ = ["AdmissionGate"]

_CLIENT = Peer.CLIENT


class AdmissionGate:
    """Applies ``[admission]`` to one connection's ``session/new|load|resume|fork``.

    Args:
        ctx: the engine context (its ledger; its configuration, :meth:`configure`,
            followed on a reload).

    Attributes:
        principal: the connection's principal (``--tokens-file``), or ``None``.
        remote: the connection is one of ``--listen`` (``applies_to = "remote"``).
        resolve: absolute path -> resolved path (the shell follows symlinks).
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.ledger = ctx.ledger
        self.principal: str | None = None
        self.remote = False
        self.resolve: Resolve = lexical_resolve
        ctx.follow(self)

    def configure(self, config: Config) -> None:
        """Builds the policy from ``config`` (also on a reload, which can switch the
        ``policy.mode``)."""
        self.policy = AdmissionPolicy(config.admission)
        self.observe = config.policy.mode == "observe"

    def bind(self, principal: str | None, remote: bool, resolve: Resolve | None) -> None:
        """Binds the connection's principal, place and resolver (the shell, once)."""
        self.principal = principal
        self.remote = remote
        if resolve is not None:
            self.resolve = resolve

    def decide(self, m: Message) -> Decision | None:
        """The refusal of client request ``m``, or ``None`` (not governed, or admitted)."""
        if m.method not in ADMITTED_METHODS or not self.policy.applies(self.remote):
            return None
        params: Any = m.params
        if params is not None and VIEW_KEY in params:
            params = bounded_members(params[VIEW_KEY]) or {}
        return self.policy.decide(params, self.principal, self.resolve)

    def refuse(self, m: Message, decision: Decision, out: list[Action]) -> bool:
        """Answers ``m`` with the refusal (or drops it if its id is in flight), audited.

        With ``policy.mode = "observe"`` the refusal is audited with
        ``would_block: true`` and counted per rule, and nothing is answered.

        Returns:
            True when ``m`` was refused (do not forward); False in observe mode.
        """
        method = m.method or ""
        data = decision.error_data(method)
        if self.observe:
            self.ledger.would_have_blocked(data, decision.rule)
        self.ledger.audit(
            out,
            AuditEvent.ADMISSION_REFUSED,
            _CLIENT,
            id=m.id,
            sessionId=m.session_id,
            verdict=decision.verdict,
            **data,
        )
        if self.observe:
            return False
        self.ledger.answer(out, _CLIENT, m.id, self.policy.refuse_code, decision.message, data)
        return True
