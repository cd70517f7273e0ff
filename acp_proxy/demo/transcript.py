"""What one demo run observed: the client's transcript, the agent's log, the audit.

Filled in by :mod:`acp_proxy.demo.runner`, read by
:mod:`acp_proxy.demo.analysis` and :mod:`acp_proxy.demo.render`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["C2P", "P2C", "Event", "Run", "update_of"]

C2P = "client->proxy"
P2C = "proxy->client"


@dataclass
class Event:
    """One line of the transcript.

    Attributes:
        kind: ``"step"`` (a heading), ``"message"`` or ``"note"`` (client remark).
        direction: ``client->proxy`` / ``proxy->client`` for messages.
        message: the decoded JSON message (or the raw line if it was not JSON).
        text: heading or remark text.
    """

    kind: str
    direction: str = ""
    message: Any = None
    text: str = ""


@dataclass
class Run:
    """Everything observed by one demo run.

    Attributes:
        marks: names the client messages the checks look at, as ``label ->
            index in events``: ``"cancel"`` (step 4), ``"resume_child"``, ``"resume_parent"``,
            ``"stale_cancel"``, ``"resume_prompt"``, ``"fresh_cancel"``.
    """

    command: list[str]
    events: list[Event] = field(default_factory=list)
    agent_log: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""
    status: int | None = None
    errors: list[str] = field(default_factory=list)
    child1: str | None = None
    child2: str | None = None
    marks: dict[str, int] = field(default_factory=dict)


def update_of(msg: Any) -> tuple[str | None, dict[str, Any]]:
    """``(params.sessionId, params.update)`` of a ``session/update``, else ``(None, {})``."""
    if isinstance(msg, dict) and msg.get("method") == "session/update":
        params = msg.get("params")
        if isinstance(params, dict):
            upd = params.get("update")
            sid = params.get("sessionId")
            return (sid if isinstance(sid, str) else None), (upd if isinstance(upd, dict) else {})
    return None, {}
