"""The demo's checks: the client's transcript matched against the agent's log and the audit."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.demo.transcript import C2P, P2C, Run, update_of

__all__ = [
    "EXPECTED_AUDIT",
    "Analysis",
    "Check",
    "agent_got",
    "analyse",
    "checks",
    "rejection_record",
]

EXPECTED_AUDIT = (
    "child_announced",
    "held",
    "released",
    "duplicate_dropped",
    "mutation_rejected",
    "grants_revoked",
    "permission_decided",
)


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
        resume_answer: received position of the answer to the parent's
            ``session/resume`` (``run.marks["resume_parent"]``), or ``None``.
        replayed: received position -> child id, for the ``subagent_update``
            messages delivered between that resume request and its answer (history).
        reannounced: child id -> received position of its first ``subagent_update``
            carrying ``capabilities`` after that answer (grants again).
        in_event: index in ``agent_in`` -> index into ``run.events`` of the client
            message it is (the messages the proxy made itself have none).
        out_after: for each of ``agent_out``, the index in ``agent_in`` of the last
            message the agent had received before it sent it (-1: none yet).
        proxy_answers: index in ``dropped`` requests of ``agent_out`` -> index in
            ``agent_in`` of the answer the proxy made itself (the agent received a
            response the client never sent, to a request the client never saw).
    """

    received: list[int]
    origin: list[int | None]
    agent_out: list[dict[str, Any]]
    agent_in: list[Any]
    dropped: list[int]
    held: dict[int, int]
    reached_agent: set[int]
    resume_answer: int | None = None
    replayed: dict[int, str] = field(default_factory=dict)
    reannounced: dict[str, int] = field(default_factory=dict)
    in_event: dict[int, int] = field(default_factory=dict)
    out_after: list[int] = field(default_factory=list)
    proxy_answers: dict[int, int] = field(default_factory=dict)


def analyse(run: Run) -> Analysis:
    """Matches the client's transcript against the agent's own log.

    A received message is paired with an identical message the agent sent and
    that no earlier received message took: the first one after the latest
    pairing so far when there is one (the proxy delivers in order), else the
    first one before it (a message the proxy held). Client messages are paired
    with what the agent received by a longest common subsequence: the proxy
    forwards them in order, so a refused message cannot take the place of an
    identical one sent later.
    """
    agent_out = [e for e in run.agent_log if e.get("dir") == "out"]
    agent_in = [e.get("message") for e in run.agent_log if e.get("dir") == "in"]
    received = [
        i for i, ev in enumerate(run.events) if ev.kind == "message" and ev.direction == P2C
    ]
    out_keys = [_key(e.get("message")) for e in agent_out]
    used: set[int] = set()
    origin: list[int | None] = []
    latest = -1
    for i in received:
        k = _key(run.events[i].message)
        free = [j for j, ok in enumerate(out_keys) if ok == k and j not in used]
        match = next((j for j in free if j > latest), free[0] if free else None)
        if match is not None:
            used.add(match)
            latest = max(latest, match)
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
    sent = [i for i, ev in enumerate(run.events) if ev.kind == "message" and ev.direction == C2P]
    pairs = _in_order_pairs([_key(run.events[i].message) for i in sent], list(map(_key, agent_in)))
    an = Analysis(received, origin, agent_out, agent_in, dropped, held, {sent[a] for a in pairs})
    an.in_event = {b: sent[a] for a, b in pairs.items()}
    seen_in = -1
    for e in run.agent_log:
        if e.get("dir") == "in":
            seen_in += 1
        elif e.get("dir") == "out":
            an.out_after.append(seen_in)
    _find_proxy_answers(an)
    _find_boundary(run, an)
    return an


def _find_proxy_answers(an: Analysis) -> None:
    """Fills ``proxy_answers``: a dropped agent request whose answer reached the agent
    although no client message carried it."""
    made = [
        b
        for b, m in enumerate(an.agent_in)
        if b not in an.in_event and isinstance(m, dict) and "method" not in m and "id" in m
    ]
    for j in an.dropped:
        msg = an.agent_out[j].get("message")
        if not (isinstance(msg, dict) and "method" in msg and "id" in msg):
            continue
        b = next((b for b in made if an.agent_in[b].get("id") == msg["id"]), None)
        if b is not None:
            made.remove(b)
            an.proxy_answers[j] = b


def _find_boundary(run: Run, an: Analysis) -> None:
    """Fills ``resume_answer``, ``replayed`` and ``reannounced`` around the parent's resume."""
    mark = run.marks.get("resume_parent")
    if mark is None:
        return
    rid = run.events[mark].message.get("id")
    for pos, i in enumerate(an.received):
        if i < mark:
            continue
        msg = run.events[i].message
        _, upd = update_of(msg)
        cid = upd.get("sessionId")
        if an.resume_answer is None:
            if _is_response(msg, rid):
                an.resume_answer = pos
            elif upd.get("sessionUpdate") == "subagent_update" and isinstance(cid, str):
                an.replayed[pos] = cid
        elif (
            upd.get("sessionUpdate") == "subagent_update"
            and isinstance(cid, str)
            and "capabilities" in upd
        ):
            an.reannounced.setdefault(cid, pos)


def _in_order_pairs(xs: list[str], ys: list[str]) -> dict[int, int]:
    """A longest common subsequence of ``xs`` and ``ys``: index in ``xs`` -> index in ``ys``."""
    n, m = len(xs), len(ys)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        for b in range(m - 1, -1, -1):
            best[a][b] = (
                best[a + 1][b + 1] + 1 if xs[a] == ys[b] else max(best[a + 1][b], best[a][b + 1])
            )
    out: dict[int, int] = {}
    a = b = 0
    while a < n and b < m:
        if xs[a] == ys[b]:
            out[a] = b
            a, b = a + 1, b + 1
        elif best[a + 1][b] >= best[a][b + 1]:
            a += 1
        else:
            b += 1
    return out


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
    asks = [j for j, e in enumerate(an.agent_out) if e.get("note") == "permission"]
    rest = [j for j in range(len(an.agent_out)) if j not in early + dups + asks]

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
    cancel_seen = run.marks.get("cancel") in an.reached_agent
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
    out.extend(_boundary_checks(run, an, received_msgs))
    out.extend(_permission_checks(an, asks))
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


def _permission_checks(an: Analysis, asks: list[int]) -> list[Check]:
    """The two permission requests of step 11: the web fetch answered by the proxy
    (reject, never shown to the client), the edit forwarded (the client's allow
    reaches the agent)."""
    answers = {
        m.get("id"): m.get("result")
        for m in an.agent_in
        if isinstance(m, dict) and "method" not in m and isinstance(m.get("result"), dict)
    }

    def option(rid: str) -> Any:
        outcome = (answers.get(rid) or {}).get("outcome")
        return outcome.get("optionId") if isinstance(outcome, dict) else None

    fetch = next((j for j in asks if an.agent_out[j]["message"].get("id") == "perm-fetch"), None)
    edit = next((j for j in asks if an.agent_out[j]["message"].get("id") == "perm-edit"), None)
    return [
        Check(
            "the permission request for a web fetch was denied by the proxy "
            "(rule no-network-tools): the agent got reject, the client never saw it",
            fetch is not None and fetch in an.dropped and option("perm-fetch") == "reject",
            f"agent got option {option('perm-fetch')!r}",
        ),
        Check(
            "the permission request for an edit (no rule) was forwarded to the client, "
            "and the client's allow reached the agent",
            edit is not None and edit not in an.dropped and option("perm-edit") == "allow",
            f"agent got option {option('perm-edit')!r}",
        ),
    ]


def _boundary_checks(run: Run, an: Analysis, received_msgs: list[Any]) -> list[Check]:
    """Steps 6-10: the refused child resume, the freshness boundary and the re-grant."""
    out: list[Check] = []
    c1 = run.child1 or "(child 1)"
    resume_child = run.marks.get("resume_child")
    rid = run.events[resume_child].message.get("id") if resume_child is not None else None
    answer = next((m for m in received_msgs if rid is not None and _is_response(m, rid)), None)
    err = answer.get("error") if isinstance(answer, dict) else None
    record = rejection_record(run, an, resume_child)
    reason = record.get("reason") if record else None
    reached = resume_child in an.reached_agent
    out.append(
        Check(
            f"the session/resume on child {c1} was answered by the proxy with -32601 "
            "(data.capability null, audit reason not_allowed_on_child), never by the agent",
            resume_child is not None
            and bool(an.agent_in)
            and not reached
            and _is_rejection(answer, None)
            and reason == "not_allowed_on_child",
            (f"code {err.get('code')}" if isinstance(err, dict) else "no error response")
            + f", audit reason {reason}, reached the agent: {'yes' if reached else 'no'}",
        )
    )
    resume_parent = run.marks.get("resume_parent")
    parent = run.events[resume_parent].message["params"]["sessionId"] if resume_parent else None
    revoked = [
        r for r in run.audit if r.get("event") == "grants_revoked" and r.get("sessionId") == parent
    ]
    counts = [r.get("count") for r in revoked]
    out.append(
        Check(
            f"resuming {parent} revoked the grants of its 2 children (audit: grants_revoked)",
            resume_parent in an.reached_agent and counts == [2],
            f"grants_revoked counts {counts}",
        )
    )
    replayed = sorted(set(an.replayed.values()))
    out.append(
        Check(
            "both children's announcements replayed before the resume answer were delivered",
            an.resume_answer is not None and replayed == sorted({c1, run.child2 or ""}),
            f"replayed {', '.join(replayed) or 'none'} at positions {sorted(an.replayed)}; "
            f"answer at {an.resume_answer}",
        )
    )
    stale = run.marks.get("stale_cancel")
    record = rejection_record(run, an, stale)
    reason = record.get("reason") if record else None
    out.append(
        Check(
            f"the session/cancel on {c1} between the resume answer and the re-announcement "
            "never reached the agent",
            stale is not None
            and bool(an.agent_in)
            and stale not in an.reached_agent
            and reason == "stale_after_parent_reload",
            f"audit reason {reason}",
        )
    )
    again = an.reannounced.get(c1)
    out.append(
        Check(
            f"the agent re-announced {c1} with capabilities after the resume answer",
            an.resume_answer is not None and again is not None and again > an.resume_answer,
            f"answer at position {an.resume_answer}, re-announcement at {again}",
        )
    )
    out.append(
        Check(
            f"the session/cancel on {c1} after the re-announcement reached the agent",
            run.marks.get("fresh_cancel") in an.reached_agent,
        )
    )
    return out


def rejection_record(run: Run, an: Analysis, index: int | None) -> dict[str, Any] | None:
    """The ``mutation_rejected`` audit record of the client message at ``run.events[index]``.

    The client messages that never reached the agent and those records are
    paired in order by method and ``sessionId``; ``None`` when the message
    reached the agent or has no record (or ``index`` is ``None``).
    """
    if index is None or index in an.reached_agent:
        return None
    records = [r for r in run.audit if r.get("event") == "mutation_rejected"]
    taken = 0
    for i, ev in enumerate(run.events[: index + 1]):
        if (
            ev.kind != "message"
            or ev.direction != C2P
            or i in an.reached_agent
            or not isinstance(ev.message, dict)
        ):
            continue
        params = ev.message.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        method = ev.message.get("method")
        match = next(
            (
                k
                for k in range(taken, len(records))
                if records[k].get("method") == method and records[k].get("sessionId") == sid
            ),
            None,
        )
        if match is None:
            continue
        if i == index:
            return records[match]
        taken = match + 1
    return None


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
