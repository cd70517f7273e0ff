"""Requests in flight, per requester, bounded in number and in bytes.

docs/design.md section 2. A request is *in flight* from the moment the proxy
forwards it until the other peer's response passes back (or the proxy answers
it when that peer is gone). Each id is answered exactly once: a second request
reusing an id in flight is never answered (its answer would be the id's second).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from acp_proxy.core.actions import Peer

__all__ = ["InFlight", "Pending"]

#: One request in flight: (method, params.sessionId, bytes counted for it).
Pending = tuple[str, Any, int]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT


class InFlight:
    """The requests each peer has sent and the other has not answered yet,
    and whether each peer is still there.

    Args:
        max_requests: at most this many in flight per requester
            (``limits.max_pending_requests``).
        max_bytes: at most this many bytes of ids, methods and session ids per
            requester (``limits.max_pending_bytes``).
    """

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        #: requester -> {id: (method, sessionId, bytes)}
        self.pending: dict[Peer, dict[Any, Pending]] = {_CLIENT: {}, _AGENT: {}}
        self._bytes: dict[Peer, int] = {_CLIENT: 0, _AGENT: 0}
        #: peer -> why it is gone (its stream ended), or ``None`` while it is there
        self.gone: dict[Peer, str | None] = {_CLIENT: None, _AGENT: None}

    def add(self, requester: Peer, rid: Any, method: str, sid: Any) -> str | None:
        """Records request ``rid`` of ``requester``; returns why it cannot be, else ``None``.

        The caller has checked that ``rid`` is not already in flight.
        """
        pending = self.pending[requester]
        id_bytes = len(rid) if type(rid) is str else int(rid or 0).bit_length() // 3 + 2
        cost = id_bytes + len(method) + (len(sid) if sid is not None else 0)
        if len(pending) >= self.max_requests:
            return f"more than limits.max_pending_requests ({self.max_requests}) in flight"
        if self._bytes[requester] + cost > self.max_bytes:
            return f"more than limits.max_pending_bytes ({self.max_bytes}) in flight"
        pending[rid] = (method, sid, cost)
        self._bytes[requester] += cost
        return None

    def pop(self, requester: Peer, rid: Any) -> Pending | None:
        """Forgets request ``rid`` of ``requester``; returns its entry, or ``None``."""
        entry = self.pending[requester].pop(rid, None)
        if entry is not None:
            self._bytes[requester] -= entry[2]
        return entry

    def take_all(self, requester: Peer) -> list[tuple[Any, Pending]]:
        """Forgets every request of ``requester`` in flight; returns them in order."""
        entries = list(self.pending[requester].items())
        self.pending[requester].clear()
        self._bytes[requester] = 0
        return entries

    def ids(self, requester: Peer) -> Collection[Any]:
        """The ids of ``requester``'s requests in flight (a read-only view)."""
        return self.pending[requester].keys()

    def count(self, requester: Peer) -> int:
        """How many requests of ``requester`` are in flight."""
        return len(self.pending[requester])
