"""What the core asks the shell to do (docs/design.md section 2)."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import attrs

__all__ = ["Action", "Audit", "Peer", "Report", "Send"]


class Peer(enum.Enum):
    """A side of the proxy."""

    CLIENT = "client"
    AGENT = "agent"

    @property
    def other(self) -> Peer:
        """The opposite side."""
        return Peer.AGENT if self is Peer.CLIENT else Peer.CLIENT

    @property
    def direction(self) -> str:
        """Direction label of traffic coming *from* this peer, as in the audit log."""
        return "client->agent" if self is Peer.CLIENT else "agent->client"


class Send(NamedTuple):
    """Write one message to ``to``.

    A named tuple rather than an attrs class: one is made per message, and a
    frozen attrs instance costs twice as much to build.

    Attributes:
        to: the receiving peer.
        data: the message bytes, without a line ending (the transport frames it);
            a run of forwarded messages is several joined by ``b"\\n"`` (JSON
            text holds no raw newline, so a newline always separates messages:
            a newline-delimited transport writes ``data`` as is, a
            message-framed one splits it).
    """

    to: Peer
    data: bytes


@attrs.frozen(slots=True)
class Audit:
    """One audit-log record (docs/design.md section 3, "Audit log").

    Attributes:
        event: ``child_announced``, ``mutation_rejected``, ``held``, ...
        direction: ``"client->agent"`` or ``"agent->client"`` (or ``None``).
        fields: the other keys (``sessionId``, ``parentSessionId``, ``method``,
            ``id``, ``reason``, ...); ``None`` values are omitted on output.
    """

    event: str
    direction: str | None
    fields: dict[str, Any]


@attrs.frozen(slots=True)
class Report:
    """A human-readable line for the proxy's own log (stderr).

    Attributes:
        level: ``"warning"``, ``"info"`` or ``"error"``.
        text: one line.
        kind: what the shell rate-limits such lines by (``None``: the text up
            to its first ``":"``), e.g. ``"session created"`` for the info
            lines of the life-cycle, whose text starts with the connection.
    """

    level: str
    text: str
    kind: str | None = None


Action = Send | Audit | Report
