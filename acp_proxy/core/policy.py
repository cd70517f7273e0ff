"""Capability enforcement on child sessions (PROTOCOL.md section 4, "Client mutations").

A client request or notification whose ``params.sessionId`` is a child and
whose method is in the mutation table is permitted only when the child's
current ``capabilities`` hold the mapped key with an object value. Unset or
``null`` capabilities permit nothing. Methods outside the table (reads such
as ``session/status``, ``session/load``, ``session/fork``) always pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from acp_proxy.core.registry import Registry

__all__ = ["Rejection", "check_mutation"]


@attrs.frozen
class Rejection:
    """Why a client mutation on a child is refused.

    Attributes:
        session_id: the child session.
        method: the client method.
        capability: the capability key it needs.
        reason: ``"missing_capability"`` or ``"session_not_announced"``.
    """

    session_id: str
    method: str
    capability: str
    reason: str = "missing_capability"

    @property
    def message(self) -> str:
        """One-line error message naming the method, the child and the capability."""
        if self.reason == "session_not_announced":
            return (
                f"acp-proxy: {self.method} refused: session {self.session_id!r} has not "
                f"been announced to the client yet"
            )
        return (
            f"acp-proxy: {self.method} is not permitted on child session "
            f"{self.session_id!r}: its capabilities lack {self.capability!r}"
        )

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
    unestablished: bool = False,
) -> Rejection | None:
    """Decides whether a client message may reach the agent.

    Args:
        registry: the shadow registry.
        mutations: client method -> capability key required on a child.
        method: the client message's method.
        session_id: its ``params.sessionId`` when a string, else ``None``.
        unestablished: True when the agent has named ``session_id`` without
            establishing it (its traffic or its announcement is held, or its
            traffic was released on hold expiry): it may be a child whose
            capabilities the proxy has not seen, so mutations fail closed.

    Returns:
        ``None`` to forward, or the :class:`Rejection`.
    """
    if session_id is None:
        return None
    capability = mutations.get(method)
    if capability is None:
        return None
    child = registry.child(session_id)
    if child is None:
        if unestablished:
            return Rejection(session_id, method, capability, "session_not_announced")
        return None
    if child.permits(capability):
        return None
    return Rejection(session_id, method, capability)
