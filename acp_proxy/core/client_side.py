"""Client -> agent: enforcement of child capabilities (DESIGN.md section 2, "Enforcement").

A client request or notification naming a child session whose
``capabilities`` do not permit the method is refused here and never reaches
the agent (:func:`~acp_proxy.core.policy.check_mutation`); everything else is
tracked and forwarded byte for byte.
"""

from __future__ import annotations

from acp_proxy.core.actions import Action
from acp_proxy.core.engine_base import _AGENT, _CLIENT, _NOTIFICATION, _REQUEST, EngineBase
from acp_proxy.core.jsonrpc import INTERNAL_ERROR, Message
from acp_proxy.core.policy import check_mutation

__all__ = ["ClientSide"]

_OPENS_SESSION = frozenset({"session/load", "session/resume"})


class ClientSide(EngineBase):
    """What :class:`~acp_proxy.core.engine.ProxyCore` does with client messages."""

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
