"""Carrying out the sans-IO core's actions, shared by the shells (:mod:`~acp_proxy.shell.relay`,
:mod:`~acp_proxy.shell.topology.chain`): sends grouped per peer, audit records written,
reports logged. The trio pieces are in :mod:`~acp_proxy.shell.relay_loop`.
"""

from __future__ import annotations

import logging
from typing import Protocol

from acp_proxy.core.actions import Action, Audit, AuditEvent, Peer, Report, Send
from acp_proxy.shell.audit import Throttle, preview
from acp_proxy.shell.log_levels import NOTICE

__all__ = [
    "LOG_LINE_LIMIT",
    "LOG_THROTTLE",
    "AuditSink",
    "flush_log_summaries",
    "route_actions",
]

log = logging.getLogger("acp_proxy")

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT


class AuditSink(Protocol):
    """Where :class:`~acp_proxy.core.actions.Audit` records go."""

    def write(self, record: Audit) -> None:
        """Records one audit event (must not block for long)."""


#: characters kept of one log line written for the core (a report, a debug audit line)
LOG_LINE_LIMIT = 300

#: the proxy's own log lines per kind (a report's text up to its first ":", or
#: "audit <event>") and second before the rest are only counted; process-wide,
#: as stderr is. :func:`flush_log_summaries` says how many were suppressed.
LOG_THROTTLE = Throttle(burst=10, window_seconds=1.0)


def _brief(fields: dict[str, object], width: int = 80) -> str:
    """``k=v`` pairs, each value a bounded preview of ``width`` characters (never a full
    repr of peer data)."""
    return " ".join(
        f"{k}={preview(v, width)}" for k, v in fields.items() if v is not None and k != "content"
    )


def _cut(text: str, limit: int = LOG_LINE_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


def flush_log_summaries(everything: bool = False) -> None:
    """Logs one line per kind whose window ended with suppressed lines (all: ``everything``)."""
    for kind, count, seconds in LOG_THROTTLE.summaries(everything):
        log.warning("%d more log lines like %r suppressed in %.1fs", count, kind, seconds)


def _log_report(a: Report) -> None:
    level = _LEVELS.get(a.level, logging.WARNING)
    if not log.isEnabledFor(level):
        return  # neither logged nor counted against the kind's rate
    text = a.text if type(a.text) is str else preview(a.text)
    flush_log_summaries()
    if LOG_THROTTLE.allow(a.kind or text.split(":", 1)[0][:60]):
        log.log(level, "%s", _cut(text))


def _log_audit(a: Audit) -> None:
    flush_log_summaries()
    if LOG_THROTTLE.allow(f"audit {a.event}"):
        log.debug("%s", _cut(f"{a.event} {a.direction or ''} {_brief(a.fields)}"))


#: audit events of a decision the proxy took in the user's place: logged at notice
_DECISIONS = frozenset(
    {
        AuditEvent.PERMISSION_DECIDED,
        AuditEvent.REQUEST_REFUSED,
        AuditEvent.MUTATION_REJECTED,
        AuditEvent.BUDGET_EXCEEDED,
        AuditEvent.ADMISSION_REFUSED,
    }
)

#: characters kept of a decision line, and of each of its values: enough for a budget's
#: reason beside a UUID session id (the line is the user's one view of a denial)
DECISION_LINE_LIMIT = 600
DECISION_VALUE_LIMIT = 160

#: the fields such a log line names, in this order
_DECISION_FIELDS = (
    *("rule", "action", "optionId", "budget", "count", "limit"),
    *("method", "id", "sessionId", "reason", "would_block"),
)


def _log_decision(a: Audit) -> None:
    """A notice line for a request the proxy refused or answered for the user: the rule
    and the request (a permission request forwarded to the user is not one)."""
    fields = a.fields
    asked = fields.get("optionId") is None and fields.get("outcome") is None
    if a.event is AuditEvent.PERMISSION_DECIDED and asked:
        return  # the user decides
    flush_log_summaries()
    if LOG_THROTTLE.allow(f"decision {a.event}"):
        named = {k: fields.get(k) for k in _DECISION_FIELDS}
        if a.event is AuditEvent.MUTATION_REJECTED and named["rule"] is None:
            named["rule"] = "[enforcement] child allowlist"
        # observe mode carried nothing out: the request went on as without the rule
        observed = fields.get("would_block") or fields.get("observed")
        lead = "would have decided (observe mode)" if observed else "decided"
        line = f"{lead} for the user: {a.event} {_brief(named, DECISION_VALUE_LIMIT)}"
        log.log(NOTICE, "%s", _cut(line, DECISION_LINE_LIMIT))


def _log_held_dropped(a: Audit) -> None:
    """A warning for held traffic dropped on expiry, as the core reports released traffic.

    The core reports ``on_expire = "release"`` itself; a drop it only audits
    (``hold_expired`` with ``reason`` ending ``; drop ...``).
    """
    reason = a.fields.get("reason")
    if not isinstance(reason, str) or reason.endswith("; release"):
        return
    flush_log_summaries()
    if LOG_THROTTLE.allow("agent traffic for unannounced session dropped"):
        cause = reason.split(";", 1)[0]
        log.warning(
            "%s",
            _cut(
                f"agent traffic for unannounced session {preview(a.fields.get('sessionId'), 80)} "
                f"dropped ({cause}, {a.fields.get('count')} messages): protocol violation"
            ),
        )


def route_actions(actions: list[Action], audit: AuditSink | None) -> dict[Peer, list[bytes]]:
    """Carries out audit and report actions; returns the sends grouped by peer.

    Audit records go to ``audit`` (and, at debug level, to the log; held
    traffic dropped on expiry also as a warning; a decision taken for the user,
    a refusal or the proxy's own answer, at notice with its rule and request);
    reports go to the log at their level (the ``info`` ones are the life-cycle), each line cut to
    :data:`LOG_LINE_LIMIT` characters and rate-limited per kind
    (:data:`LOG_THROTTLE`). Sends keep
    their order within each peer.

    Args:
        actions: the core's actions, in order.
        audit: the audit sink, or ``None``.

    Returns:
        ``{peer: [frame, ...]}`` (frames without line endings).
    """
    to_client: list[bytes] = []
    to_agent: list[bytes] = []
    debug = log.isEnabledFor(logging.DEBUG)
    notice = log.isEnabledFor(NOTICE)
    for a in actions:
        if type(a) is Send:
            # identity tests: hashing an Enum member runs Python code
            (to_client if a.to is _CLIENT else to_agent).append(a.data)
        elif type(a) is Audit:
            if audit is not None:
                audit.write(a)
            if debug:
                _log_audit(a)
            if a.event in _DECISIONS and notice:
                _log_decision(a)
            if a.event is AuditEvent.HOLD_EXPIRED:
                _log_held_dropped(a)
        elif type(a) is Report:
            _log_report(a)
    batch: dict[Peer, list[bytes]] = {}
    if to_client:
        batch[_CLIENT] = to_client
    if to_agent:
        batch[_AGENT] = to_agent
    return batch
