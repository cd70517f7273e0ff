"""What ``initialize`` negotiated on one connection (docs/protocol.md section 2)."""

from __future__ import annotations

import attrs

__all__ = ["Negotiated"]


@attrs.define(slots=True)
class Negotiated:
    """Facts of the ``initialize`` exchange the engine's directions share.

    Attributes:
        protocol_version: from the agent's ``initialize`` result, or ``None``.
        client_subagents: protocol v1: the client advertised
            ``clientCapabilities.subagents`` (an object).
    """

    protocol_version: int | None = None
    client_subagents: bool = False
