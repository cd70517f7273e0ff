"""The engine's counters: one mutable object, and the frozen snapshot it gives.

docs/design.md section 2 (the accounting invariant): every message accepted (a frame, or
one element of a batch) ends as exactly one of *forwarded*, *answered* by the
proxy, *dropped* with an audit record, or is still *held*:
``accepted == forwarded + answered + dropped + held`` always.
"""

from __future__ import annotations

import attrs

from acp_proxy.config.records import FrozenRecord, Record

__all__ = ["CoreStatistics", "Counters"]


@attrs.define(slots=True, eq=False, repr=False)
class Counters(Record):
    """Message counts of one connection, incremented as the engine decides.

    Attributes: as in :class:`CoreStatistics` (the ones that are counts of messages).
    """

    accepted: int = 0
    forwarded: int = 0
    answered: int = 0
    dropped: int = 0
    rejected_mutations: int = 0
    duplicates_removed: int = 0
    invalid: int = 0
    non_json_agent_lines: int = 0
    malformed_errors: int = 0
    oversize: int = 0


@attrs.frozen(eq=False, repr=False)
class CoreStatistics(FrozenRecord):
    """Counters of one :class:`~acp_proxy.core.engine.ProxyCore` (all message counts
    include batch elements).

    Attributes:
        accepted: messages taken in from either peer.
        forwarded: messages delivered to the other peer (rewrites included).
        answered: messages the proxy answered itself instead of forwarding.
        dropped: messages dropped with an audit record.
        held: messages currently in the hold buffer.
        held_bytes: bytes currently in the hold buffer.
        rejected_mutations: client mutations on children refused.
        duplicates_removed: state reports dropped or rewritten as duplicates.
        invalid: frames that were not valid JSON-RPC (either side).
        non_json_agent_lines: agent stdout lines that were not JSON.
        malformed_errors: error responses without an integer code / string message.
        oversize: messages skipped for exceeding ``max_message_bytes``.
        pending_client_requests: client requests in flight toward the agent.
        pending_agent_requests: agent requests in flight toward the client.
        children: child sessions in the registry.
        protocol_version: negotiated by ``initialize``, or ``None``.
    """

    accepted: int
    forwarded: int
    answered: int
    dropped: int
    held: int
    held_bytes: int
    rejected_mutations: int
    duplicates_removed: int
    invalid: int
    non_json_agent_lines: int
    malformed_errors: int
    oversize: int
    pending_client_requests: int
    pending_agent_requests: int
    children: int
    protocol_version: int | None
