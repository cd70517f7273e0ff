"""The demo's checks: the client's transcript matched against the agent's log and the audit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from acp_proxy.demo.transcript import C2P, P2C, Run, update_of

__all__ = ["EXPECTED_AUDIT", "Analysis", "Check", "agent_got", "analyse", "checks"]

EXPECTED_AUDIT = ("child_announced", "held", "released", "duplicate_dropped", "mutation_rejected")


def _key(msg: Any) -> str:
    return json.dumps(msg, sort_keys=True, separators=(",", ":"))


@dataclass
class Analysis:
    """How the client's view relates to what the agent sent and received.

    Attributes:
        received: indices into ``run.events`` of proxy->client messages, in order.
        origin: for each of ``received``, the index in ``agent_out`` it matches,
            or ``None`` when the proxy wrote it itself.
        agent_out: the agent's sent messages (agent-log entries) in order.
        agent_in: the messages the agent received, in order.
        dropped: indices in ``agent_out`` of messages that never reached the client.
        held: received position -> the received position of the message that
            overtook it (the agent sent the overtaker later, the proxy delivered it first).
        reached_agent: indices into ``run.events`` of client messages the agent received.
    """

    received: list[int]
    origin: list[int | None]
    agent_out: list[dict[str, Any]]
    agent_in: list[Any]
    dropped: list[int]
    held: dict[int, int]
    reached_agent: set[int]


def analyse(run: Run) -> Analysis:
    """Matches the client's transcript against the agent's own log."""
    agent_out = [e for e in run.agent_log if e.get("dir") == "out"]
    agent_in = [e.get("message") for e in run.agent_log if e.get("dir") == "in"]
    received = [
        i for i, ev in enumerate(run.events) if ev.kind == "message" and ev.direction == P2C
    ]
    used: set[int] = set()
    origin: list[int | None] = []
    for i in received:
        k = _key(run.events[i].message)
        match = next(
            (j for j, e in enumerate(agent_out) if j not in used and _key(e.get("message")) == k),
            None,
        )
        if match is not None:
            used.add(match)
        origin.append(match)
    dropped = [j for j in range(len(agent_out)) if j not in used]
    held: dict[int, int] = {}
    for pos, a in enumerate(origin):
        if a is None:
            continue
        for prev in range(pos - 1, -1, -1):
            b = origin[prev]
            if b is not None and b > a:
                held[pos] = prev
                break
    reached: set[int] = set()
    in_used: set[int] = set()
    for i, ev in enumerate(run.events):
        if ev.kind == "message" and ev.direction == C2P:
            k = _key(ev.message)
            for j, m in enumerate(agent_in):
                if j not in in_used and _key(m) == k:
                    in_used.add(j)
                    reached.add(i)
                    break
    return Analysis(received, origin, agent_out, agent_in, dropped, held, reached)


@dataclass
class Check:
    """One expectation of the demo."""

    name: str
    ok: bool
    detail: str = ""


def _is_rejection(msg: Any, capability: str | None) -> bool:
    if not isinstance(msg, dict):
        return False
    err = msg.get("error")
    if not isinstance(err, dict):
        return False
    data = err.get("data")
    return (
        err.get("code") == -32601
        and isinstance(data, dict)
        and data.get("capability") == capability
    )


def checks(run: Run, an: Analysis) -> list[Check]:
    """The expectations, each with what was observed."""
    out: list[Check] = []
    events = run.events
    received_msgs = [events[i].message for i in an.received]
    early = [j for j, e in enumerate(an.agent_out) if e.get("note") == "early"]
    dups = [j for j, e in enumerate(an.agent_out) if e.get("note") == "duplicate"]
    rest = [j for j in range(len(an.agent_out)) if j not in early and j not in dups]

    # The update the agent sent before its session/new response.
    resp2 = next((p for p, m in enumerate(received_msgs) if _is_response(m, 2)), None)
    warm = _pos_of(an, early[0]) if early else None
    out.append(
        Check(
            "the update sent before the session/new response was held, then delivered "
            "right after the response",
            resp2 is not None and warm is not None and warm == resp2 + 1,
            f"response at position {resp2}, update at {warm}",
        )
    )
    # The child's message sent before the child's announcement.
    chunk = _pos_of(an, early[1]) if len(early) > 1 else None
    announced = None
    if chunk is not None:
        child, _ = update_of(received_msgs[chunk])
        announced = next(
            (
                p
                for p, m in enumerate(received_msgs)
                if update_of(m)[1].get("sessionUpdate") == "subagent_update"
                and update_of(m)[1].get("sessionId") == child
            ),
            None,
        )
    out.append(
        Check(
            "the child's message sent before the child was announced was held, then "
            "delivered right after the announcement",
            chunk is not None and announced is not None and chunk == announced + 1,
            f"announcement at position {announced}, message at {chunk}",
        )
    )
    dropped_dups = [j for j in dups if j in an.dropped]
    out.append(
        Check(
            "duplicate state reports were removed",
            bool(dups) and len(dropped_dups) == len(dups),
            f"{len(dropped_dups)} of {len(dups)} duplicates removed",
        )
    )
    lost = [j for j in rest + early if j in an.dropped]
    out.append(
        Check(
            "every other agent message reached the client unchanged",
            bool(an.agent_out) and not lost,
            f"{len(lost)} lost" if lost else f"{len(rest) + len(early)} delivered",
        )
    )
    c1, c2 = run.child1 or "(child 1)", run.child2 or "(child 2)"
    cancel_seen = agent_got(an, "session/cancel", c1)
    out.append(
        Check(
            f"the permitted session/cancel on child {c1} reached the agent",
            cancel_seen,
        )
    )
    resp4 = next((m for m in received_msgs if _is_response(m, 4)), None)
    err4 = resp4.get("error") if isinstance(resp4, dict) else None
    out.append(
        Check(
            f"the forbidden session/prompt on child {c2} got error -32601 with "
            "data.capability == null (no capability can grant it: an allowlist)",
            _is_rejection(resp4, None),
            f"code {err4.get('code')}, data {json.dumps(err4.get('data'))}"
            if isinstance(err4, dict)
            else "no error response",
        )
    )
    leaked = agent_got(an, "session/prompt", c2)
    out.append(
        Check(
            f"the agent never received the forbidden session/prompt on {c2}",
            run.child2 is not None and bool(an.agent_in) and not leaked,
        )
    )
    events_seen = {r.get("event") for r in run.audit}
    missing = [e for e in EXPECTED_AUDIT if e not in events_seen]
    out.append(
        Check(
            "the audit trail records " + ", ".join(EXPECTED_AUDIT),
            not missing,
            f"missing: {', '.join(missing)}" if missing else f"{len(run.audit)} records",
        )
    )
    out.append(
        Check(
            "the proxy exited with the agent's status 0 after the client closed stdin",
            run.status == 0,
            f"exit status {run.status}",
        )
    )
    return [Check(err, False) for err in run.errors] + out


def agent_got(an: Analysis, method: str, session_id: str | None) -> bool:
    """True when the agent received ``method`` on ``session_id``."""
    return session_id is not None and any(
        isinstance(m, dict)
        and m.get("method") == method
        and isinstance(m.get("params"), dict)
        and m["params"].get("sessionId") == session_id
        for m in an.agent_in
    )


def _is_response(msg: Any, rid: int) -> bool:
    return isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg


def _pos_of(an: Analysis, agent_index: int) -> int | None:
    return next((p for p, a in enumerate(an.origin) if a == agent_index), None)
