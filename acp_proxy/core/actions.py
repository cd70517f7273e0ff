"""What the core asks the shell to do (docs/design.md section 2)."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import attrs

from acp_proxy.config.records import FrozenRecord

__all__ = [
    "Action",
    "Audit",
    "AuditEvent",
    "Peer",
    "Report",
    "Send",
    "StoreCall",
    "StoreReply",
]


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


class AuditEvent(enum.StrEnum):
    """Every audit record's ``event`` (docs/design.md section 3, "Audit log").

    A ``str`` enum: a record's event compares equal to its name and is written
    as it (``AuditEvent.HELD == "held"``).
    """

    ADMISSION_REFUSED = "admission_refused"
    BATCH_REFUSED = "batch_refused"
    BUDGET_EXCEEDED = "budget_exceeded"
    CHILD_ANNOUNCED = "child_announced"
    CHILD_UPDATED = "child_updated"
    CHILDREN_RETIRED = "children_retired"
    CONFIG_RELOADED = "config_reloaded"
    CONFIG_RELOAD_FAILED = "config_reload_failed"
    CONNECTION_CLOSED = "connection_closed"
    CONNECTION_OPENED = "connection_opened"
    CONNECTION_REJECTED = "connection_rejected"
    DUPLICATE_DROPPED = "duplicate_dropped"
    ELICITATION_DECLINED = "elicitation_declined"
    GRANTS_RESTORED = "grants_restored"
    GRANTS_REVOKED = "grants_revoked"
    HELD = "held"
    HOLD_EXPIRED = "hold_expired"
    INVALID_MESSAGE = "invalid_message"
    INVALID_SUBAGENT_UPDATE = "invalid_subagent_update"
    KEEPALIVE_TIMEOUT = "keepalive_timeout"
    MUTATION_REJECTED = "mutation_rejected"
    NOTIFICATION_DROPPED = "notification_dropped"
    OVERSIZE_MESSAGE = "oversize_message"
    PEER_CLOSED = "peer_closed"
    PERMISSION_ANSWERED = "permission_answered"
    PERMISSION_DECIDED = "permission_decided"
    PROTOCOL_VIOLATION = "protocol_violation"
    REGISTRY_CONFLICT = "registry_conflict"
    REGISTRY_LIMIT = "registry_limit"
    RELEASED = "released"
    SANDBOX_FAILED = "sandbox_failed"
    SANDBOX_STARTED = "sandbox_started"
    REQUEST_DROPPED = "request_dropped"
    REQUEST_REFUSED = "request_refused"
    SUPPRESSED = "suppressed"
    UNKNOWN_RESPONSE = "unknown_response"


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


@attrs.frozen(slots=True, eq=False, repr=False)
class Audit(FrozenRecord):
    """One audit-log record (docs/design.md section 3, "Audit log").

    Attributes:
        event: what happened (:class:`AuditEvent`).
        direction: ``"client->agent"`` or ``"agent->client"`` (or ``None``).
        fields: the other keys (``sessionId``, ``parentSessionId``, ``method``,
            ``id``, ``reason``, ...); ``None`` values are omitted on output.
    """

    event: AuditEvent
    direction: str | None
    fields: dict[str, Any]


@attrs.frozen(slots=True, eq=False, repr=False)
class Report(FrozenRecord):
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


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class StoreCall(FrozenRecord):
    """Ask the shared budget store (issue 28; docs/design.md "Budgets shared through a
    store"). The shell runs it off the event loop and hands the
    :class:`StoreReply` to ``ProxyCore.store_result(call, reply, now)``.

    A ``"reserve"`` holds up the client's traffic until its reply (the prompt it
    decides waits in the core); an ``"add"`` does not.

    Attributes:
        ticket: the core's number for this call (echoed by the reply).
        op: ``"reserve"`` (count one prompt, atomically checking the prompt and
            token limits) or ``"add"`` (add ``amount`` tokens).
        key: the shared counters' name (without the store's prefix).
        amount: tokens to add (``"add"``).
        prompt_limit: prompts allowed per window (``0``: no limit).
        token_limit: tokens allowed (``0``: no limit).
        window_s: the counters' expiry, seconds.
        commit_over: count a prompt beyond the limit too (observe mode).
    """

    ticket: int
    op: str
    key: str
    amount: int = 0
    prompt_limit: int = 0
    token_limit: int = 0
    window_s: float = 3600.0
    commit_over: bool = False


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class StoreReply(FrozenRecord):
    """The store's answer to a :class:`StoreCall`.

    Attributes:
        ok: the store answered (``False``: unreachable or failed; ``error`` says why).
        allowed: ``"reserve"``: the prompt is within both limits.
        budget: ``"reserve"`` refused: the budget used up
            (``"prompts_per_window"`` or ``"max_tokens"``).
        prompts: prompts counted in the window (this one included).
        tokens: tokens counted in the window.
        reset_in_s: seconds until the counters expire.
        error: why the store could not answer (names the store).
    """

    ok: bool
    allowed: bool = True
    budget: str | None = None
    prompts: int = 0
    tokens: int = 0
    reset_in_s: float = 0.0
    error: str | None = None


Action = Send | Audit | Report | StoreCall
