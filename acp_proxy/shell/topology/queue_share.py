"""One queue budget shared by the connections of ``--listen`` (issue 29).

Each :class:`~acp_proxy.shell.relay.Relay` bounds the bytes queued toward a
peer and not yet written (4 MiB each way, right for the one connection of
the stdio topology). A server of many connections whose clients read slower
than their agents write would fill every connection's queue: 50 connections
held 4 MiB each, 244 MiB in all. :class:`QueueShare` gives the connections
open at a time an equal share of :data:`LISTEN_QUEUED_BYTES` per direction,
at most the stdio bound and at least :data:`MIN_QUEUED_BYTES`: one
connection keeps 4 MiB, 50 get 164 KiB each. A message larger than its
share still passes alone (the relay admits one batch over the bound when
nothing else is queued), so no message is refused for it, and a connection
never waits for another one: each share is its own.

A share that shrinks (a connection opened) bounds what is queued next; the
bytes already queued toward a peer are written first.
"""

from __future__ import annotations

from acp_proxy.shell.relay import DEFAULT_MAX_QUEUED_BYTES, Relay

__all__ = ["LISTEN_QUEUED_BYTES", "MIN_QUEUED_BYTES", "QueueShare"]

#: bytes queued toward the clients (and, apart, toward the agents) of all connections
LISTEN_QUEUED_BYTES = 8 * 1024 * 1024

#: the smallest share of one connection, in bytes (also its bound beyond 128 connections)
MIN_QUEUED_BYTES = 64 * 1024


def share_bytes(connections: int, total_bytes: int = LISTEN_QUEUED_BYTES) -> int:
    """The per-direction queue bound of each of ``connections`` open connections, bytes.

    ``total_bytes // connections``, clamped to ``[MIN_QUEUED_BYTES,
    DEFAULT_MAX_QUEUED_BYTES]``; ``connections`` below 1 counts as 1.
    """
    share = total_bytes // max(1, connections)
    return max(MIN_QUEUED_BYTES, min(DEFAULT_MAX_QUEUED_BYTES, share))


class QueueShare:
    """The relays of the open connections, each bounded to its share.

    Args:
        total_bytes: bytes queued per direction across all connections.
    """

    def __init__(self, total_bytes: int = LISTEN_QUEUED_BYTES) -> None:
        self.total_bytes = total_bytes
        self._relays: set[Relay] = set()

    @property
    def share(self) -> int:
        """The bound each open connection's relay has now, bytes per direction."""
        return share_bytes(len(self._relays), self.total_bytes)

    def add(self, relay: Relay) -> None:
        """A connection's relay starts: every relay gets the new (smaller) share."""
        self._relays.add(relay)
        self._apply()

    def discard(self, relay: Relay) -> None:
        """A connection's relay ended: the others get the new (larger) share."""
        self._relays.discard(relay)
        self._apply()

    def _apply(self) -> None:
        share = self.share
        for relay in self._relays:
            relay.set_max_queued_bytes(share)
