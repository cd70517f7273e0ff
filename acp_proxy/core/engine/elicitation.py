"""The elicitation gate: ``[elicitation]`` applied to agent ``elicitation/create`` (issue 26).

:mod:`~acp_proxy.core.session.elicitation` holds the rules. The agent direction
asks this gate when it *delivers* a request (right away for a session the
client knows, or on release from the hold buffer), so the hold and the child
enforcement rules come first. A declined request is answered by the proxy to
the agent with ``{"action": "decline"}``, never shown to the client, and
audited ``elicitation_declined``; a later ``$/cancel_request`` naming it is
dropped like one for a request the permission gate answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer
from acp_proxy.core.session.elicitation import ElicitationRules, decline_frame
from acp_proxy.core.wire.jsonrpc import Message
from acp_proxy.core.wire.jsonscan import bounded_members
from acp_proxy.core.wire.views import VIEW_KEY

if TYPE_CHECKING:
    from acp_proxy.core.engine.context import EngineContext

__all__ = ["ELICITATION_CREATE", "ElicitationGate"]

_AGENT = Peer.AGENT
ELICITATION_CREATE = "elicitation/create"


class ElicitationGate:
    """Applies ``[elicitation]`` to one connection's agent elicitation requests.

    Args:
        ctx: the engine context: its ledger (outcomes, counters and requests in
            flight), its permission gate, whose ``answered`` table remembers the
            requests the proxy answered (for ``$/cancel_request``), and its
            configuration (:meth:`configure`, followed on a reload).
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.ledger = ctx.ledger
        self.permissions = ctx.gate
        ctx.follow(self)

    def configure(self, config: Config) -> None:
        """Builds the rules from ``config`` (also on a reload)."""
        self.rules = ElicitationRules(config.elicitation)
        self.observe = config.policy.mode == "observe"
        self._max_remembered = config.limits.max_pending_requests

    def decide(self, m: Message, out: list[Action]) -> bool:
        """Decides agent request ``m`` (an ``elicitation/create`` in flight).

        Returns:
            True when the proxy declined it (answered, no longer in flight: do not
            forward); False to forward it unchanged.
        """
        if not self.rules.active:
            return False
        params: Any = m.params
        if params is not None and VIEW_KEY in params:
            params = bounded_members(params[VIEW_KEY]) or {}
        verdict = self.rules.decide(params)
        if verdict is None:
            return False
        rid = m.id
        fields = verdict.audit_fields()
        if self.observe:  # policy.mode = "observe": decided and audited, then forwarded
            self.ledger.would_have_blocked(fields, verdict.rule)
        self.ledger.audit(
            out,
            AuditEvent.ELICITATION_DECLINED,
            _AGENT,
            id=rid,
            sessionId=m.session_id,
            method=m.method,
            **fields,
        )
        if self.observe:
            return False
        self.ledger.inflight.pop(_AGENT, rid)
        answered = self.permissions.answered
        answered[rid] = verdict.rule
        while len(answered) > self._max_remembered:
            del answered[next(iter(answered))]
        if self.ledger.inflight.gone[_AGENT] is None:
            self.ledger.reply(out, _AGENT, decline_frame(rid))
        else:
            self.ledger.n.dropped += 1
        return True
