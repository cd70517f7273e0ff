"""Enforcement on child sessions (docs/protocol.md section 4, "Client mutations on a child").

The stabilized spec is an **allowlist**: a client request or notification
whose ``params.sessionId`` names a child reaches the agent only if its method
is a read (``enforcement.child_read_only``) or a mutation that the child's
current ``capabilities`` grant through ``enforcement.child_mutations``.
Everything else naming a child is refused, methods the proxy has never heard
of included. A child whose grants were revoked by a load or resume of an
ancestor (the freshness boundary) permits no mutation until re-announced.
An id the agent has named without establishing it, or whose announcement the
proxy could not register, is refused the same way (fail closed). Methods
that name no session, and ``$/cancel_request``, are not child mutations.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs

from acp_proxy.config import NEVER_ON_CHILD
from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.session.registry import Registry

__all__ = ["Rejection", "check_mutation"]

#: Hop-scoped JSON-RPC cancellation: never a mutation of a session.
_NOT_A_MUTATION = frozenset({"$/cancel_request"})


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class Rejection(FrozenRecord):
    """Why a client message naming a child is refused.

    Attributes:
        session_id: the child session.
        method: the client method.
        capability: the capability key that would grant it, or ``None`` when
            no key can (the method is not in ``enforcement.child_mutations``).
        reason: ``"missing_capability"``, ``"not_allowed_on_child"``,
            ``"stale_after_parent_reload"``, ``"session_not_announced"`` or
            ``"announcement_not_registered"``.
    """

    session_id: str
    method: str
    capability: str | None
    reason: str = "missing_capability"

    @property
    def message(self) -> str:
        """One-line error message naming the method, the child and the capability."""
        head = f"acp-proxy: {self.method} refused on child session {self.session_id!r}"
        if self.reason == "session_not_announced":
            return (
                f"acp-proxy: {self.method} refused: session {self.session_id!r} has not "
                f"been announced to the client yet"
            )
        if self.reason == "announcement_not_registered":
            return (
                f"{head}: the proxy could not register it (dropped or invalid announcement, "
                f"or its parent was closed)"
            )
        if self.reason == "not_allowed_on_child" and self.method in NEVER_ON_CHILD:
            return f"{head}: the protocol does not allow it on a child session"
        if self.reason == "not_allowed_on_child":
            return f"{head}: no child capability grants this method"
        if self.reason == "stale_after_parent_reload":
            return (
                f"{head}: its grants were revoked when its parent was loaded or resumed, "
                f"and it has not been re-announced since"
            )
        return f"{head}: its capabilities lack {self.capability!r}"

    @property
    def data(self) -> dict[str, Any]:
        """The error's ``data``: ``{"sessionId", "method", "capability"}``."""
        return {"sessionId": self.session_id, "method": self.method, "capability": self.capability}


def check_mutation(
    registry: Registry,
    mutations: Mapping[str, str],
    method: str,
    session_id: str | None,
    *,
    read_only: Collection[str] = ("session/status",),
    unestablished: bool = False,
) -> Rejection | None:
    """Decides whether a client message may reach the agent.

    Args:
        registry: the shadow registry.
        mutations: client method -> capability key that grants it on a child.
        method: the client message's method.
        session_id: its ``params.sessionId`` when a string, else ``None``.
        read_only: methods that always pass on a child.
        unestablished: True when the agent has named ``session_id`` without
            establishing it (its traffic or its announcement is held, or its
            traffic was released on hold expiry): it may be a child whose
            capabilities the proxy has not seen, so mutations fail closed.

    Returns:
        ``None`` to forward, or the :class:`Rejection`.
    """
    if session_id is None or method in _NOT_A_MUTATION:
        return None
    child = registry.child(session_id)
    if child is None:
        if unestablished:
            reason = "session_not_announced"
        elif registry.is_denied(session_id):
            reason = "announcement_not_registered"
        else:
            return None  # an ordinary session, or one the agent never named
        if method in read_only:
            return None
        return Rejection(session_id, method, mutations.get(method), reason)
    if method in read_only:
        return None
    capability = mutations.get(method)
    if capability is None:
        return Rejection(session_id, method, None, "not_allowed_on_child")
    if not registry.is_fresh(session_id):
        return Rejection(session_id, method, capability, "stale_after_parent_reload")
    if child.permits(capability):
        return None
    return Rejection(session_id, method, capability)
