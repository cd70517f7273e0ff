"""What ``initialize`` negotiated on one connection (docs/protocol.md section 2)."""

from __future__ import annotations

import attrs

from acp_proxy.config.records import Record

__all__ = ["MAX_NAME_CHARS", "Negotiated", "peer_info", "peer_name"]

#: characters kept of a peer's name (``clientInfo.name`` / ``agentInfo.name``, v2 ``info.name``)
MAX_NAME_CHARS = 128


@attrs.define(slots=True, eq=False, repr=False)
class Negotiated(Record):
    """Facts of the ``initialize`` exchange the engine's directions share.

    Attributes:
        protocol_version: from the agent's ``initialize`` result, or ``None``;
            never above :attr:`client_protocol_version` (an agent answering a
            version the client did not ask for is audited and not believed).
        client_protocol_version: the version the client's ``initialize``
            request asked for, when an integer.
        client_subagents: protocol v1: the client advertised
            ``clientCapabilities.subagents`` (an object).
        client_name, agent_name: the peers' names in the request and the
            result (v1 ``clientInfo.name`` / ``agentInfo.name``, v2
            ``info.name``: :func:`peer_info`), when strings (at most
            :data:`MAX_NAME_CHARS` kept).
    """

    protocol_version: int | None = None
    client_protocol_version: int | None = None
    client_subagents: bool = False
    client_name: str | None = None
    agent_name: str | None = None


def peer_info(body: object, v1_key: str) -> object:
    """The peer's implementation object in ``initialize`` params or result ``body``:
    ``v1_key`` (``clientInfo`` / ``agentInfo``, protocol v1) when an object, else
    ``info`` (protocol v2, docs/protocol.md section 7); ``None`` when neither."""
    if type(body) is not dict:
        return None
    info = body.get(v1_key)
    return info if type(info) is dict else body.get("info")


def peer_name(info: object) -> str | None:
    """``info.name`` of a ``clientInfo`` / ``agentInfo`` object, cut to :data:`MAX_NAME_CHARS`."""
    if type(info) is not dict:
        return None
    name = info.get("name")
    return name[:MAX_NAME_CHARS] if type(name) is str else None
