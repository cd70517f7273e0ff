"""The demo's output: the readable report (:func:`render`) or JSON lines (:func:`render_json`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import textwrap
from typing import Any

from acp_proxy.demo.analysis import Analysis, Check, rejection_record
from acp_proxy.demo.summary import summarize
from acp_proxy.demo.transcript import C2P, P2C, Run, update_of

__all__ = ["render", "render_json"]

ARROWS = {
    C2P: "client -> proxy",
    P2C: "proxy -> client",
    "dropped": "agent -> proxy ",
    "to_agent": "proxy -> agent ",
}
WIDTH = max(72, min(110, shutil.get_terminal_size((100, 24)).columns - 1))
COL = 25  # where message summaries start


def _wrap(text: str, first: str, indent: int, hang: int | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=" " * indent + first,
        subsequent_indent=" " * (indent + len(first) if hang is None else hang),
        break_on_hyphens=False,
    )


def _msg_lines(arrow: str, msg: Any) -> list[str]:
    rid = msg.get("id") if isinstance(msg, dict) else None
    tag = f"[{rid}]" if rid is not None else ""
    head = f"  {arrow}  {tag:<4} "
    return textwrap.wrap(
        summarize(msg),
        WIDTH,
        initial_indent=head,
        subsequent_indent=" " * (len(head) + 2),
        break_on_hyphens=False,
    )


def _overtaker(msg: Any) -> str:
    if isinstance(msg, dict) and "method" not in msg and "id" in msg:
        return f"the response [{msg['id']}]"
    _, upd = update_of(msg)
    if upd.get("sessionUpdate") == "subagent_update":
        return f"the announcement of child {upd.get('sessionId')}"
    return "the message above"


def _held_note(run: Run, an: Analysis, pos: int) -> str:
    msg = run.events[an.received[pos]].message
    sid, _ = update_of(msg)
    over = run.events[an.received[an.held[pos]]].message
    return (
        f"HELD, then RELEASED: the agent sent this before {_overtaker(over)}, while the "
        f"client could not know session {sid} yet. The proxy held it and delivered it "
        "right after (audit: held, released)."
    )


def _dropped_note(reasons: list[tuple[str, str]]) -> str:
    event, why = reasons.pop(0) if reasons else ("?", "no audit record")
    if event == "duplicate_dropped":
        return (
            f"DUPLICATE REMOVED: the agent sent this, but it {why}, so it says nothing "
            "new and the proxy does not pass it on (audit: duplicate_dropped)."
        )
    return f"DROPPED by the proxy: {why} (audit: {event})."


def _proxy_answer_note(run: Run, msg: Any) -> str:
    """The note on an agent request the proxy answered itself (a permission rule)."""
    rid = msg.get("id") if isinstance(msg, dict) else None
    record = next(
        (r for r in run.audit if r.get("event") == "permission_decided" and r.get("id") == rid),
        None,
    )
    if record is None:
        how, event = "no audit record", "?"
    else:
        verb = {"deny": "denied", "allow": "allowed"}.get(str(record.get("action")), "decided")
        how, event = f"{verb} by rule {record.get('rule')}", "permission_decided"
    return (
        f"ANSWERED by the proxy: {how} (audit: {event}). The client never saw this "
        "request; the agent received the proxy's answer, below."
    )


def _client_note(run: Run, an: Analysis, i: int) -> str | None:
    msg = run.events[i].message
    if not isinstance(msg, dict):
        return None
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    assert isinstance(params, dict)
    sid = params.get("sessionId")
    record = rejection_record(run, an, i)
    if record is not None:
        reason = record.get("reason")
        if reason == "stale_after_parent_reload":
            return (
                f"MUTATION REJECTED: the resume revoked {sid}'s grants and the agent has not "
                "re-announced it since. The proxy drops the notification (audit: "
                "mutation_rejected, notification_dropped)."
            )
        cap = record.get("capability")
        if cap:
            why = f'its capabilities lack "{cap}", which {method} needs'
        elif method in ("session/load", "session/resume"):
            why = f"no capability can grant {method} on a child"
        else:
            why = f"no child capability grants {method} (enforcement is an allowlist)"
        return (
            f"MUTATION REJECTED: {sid} is a child and {why}. The proxy does not forward the "
            "request: it answers it itself, below (audit: mutation_rejected)."
        )
    if i == run.marks.get("resume_parent"):
        revoked = next((r for r in run.audit if r.get("event") == "grants_revoked"), {})
        return (
            f"FRESHNESS BOUNDARY: forwarded; {sid}'s {revoked.get('count', '?')} children "
            "lose any grants until the agent re-announces them after its answer (audit: "
            "grants_revoked)."
        )
    if method == "session/cancel" and sid == run.child1 and i in an.reached_agent:
        again = i == run.marks.get("fresh_cancel")
        return (
            f"PERMITTED: {sid} was {'re-announced after the resume' if again else 'announced'} "
            'with capabilities {"cancel": {}}, so the proxy forwarded this notification; the '
            "agent received it."
        )
    return None


def _boundary_note(run: Run, an: Analysis, pos: int) -> str | None:
    """What the freshness boundary means for the message at received position ``pos``."""
    sid, upd = update_of(run.events[an.received[pos]].message)
    cid = upd.get("sessionId")
    if pos in an.replayed:
        if pos != min(an.replayed):
            return None
        return (
            f"HISTORY: replayed before the resume answer (so is the next child). Delivered, "
            f"but capabilities in history grant nothing: {cid} stays revoked."
        )
    answer = an.resume_answer
    mark = run.marks.get("resume_parent", len(run.events))
    if (
        answer is not None
        and an.received[pos] > mark
        and pos < answer
        and upd.get("sessionUpdate") == "state_update"
        and any(update_of(run.events[i].message) == (sid, upd) for i in an.received[:pos])
    ):
        return (
            f"CURRENT STATE of {sid}, as before the resume: a resume starts a new epoch, "
            "so it is not removed as a duplicate."
        )
    if cid is not None and an.reannounced.get(cid) == pos:
        caps = upd.get("capabilities")
        if isinstance(caps, dict) and caps:
            return (
                f"RE-GRANTED: re-announced after the resume answer, with capabilities "
                f"{{{', '.join(caps)}}}: the client may {' or '.join(caps)} {cid} again."
            )
    return None


def _answered_note(msg: Any) -> str:
    err = msg.get("error") if isinstance(msg, dict) else None
    data = err.get("data") if isinstance(err, dict) else None
    return f"ANSWERED BY THE PROXY: the agent never saw the request. error.data: {json.dumps(data)}"


def render(run: Run, an: Analysis, results: list[Check], prog: str = "acp-proxy") -> str:
    """The human-readable report."""
    lines: list[str] = []
    add = lines.append
    shown_cmd = shlex.join(["python" if a == sys.executable else a for a in run.command]).replace(
        _audit_dir(run), "$TMP"
    )
    add("acp-proxy demo")
    add("==============")
    lines.extend(
        _wrap(
            "A scripted ACP client (this command) talks to a scripted ACP agent through the "
            "real proxy, which runs as a subprocess:",
            "",
            0,
        )
    )
    add("")
    add(f"  {shown_cmd}")
    add("")
    lines.extend(
        _wrap(
            "The agent misbehaves on purpose, as real agents do: it talks about sessions "
            "before the client can know them, and repeats state reports (a session's "
            "state_update, and the \"mirror\" of a child's state on its parent's "
            "subagent_update). It starts two subagents (child sessions): the client may "
            "cancel the first, and may not change the second at all. Then the client resumes "
            "the parent session: the children lose their grants until the agent re-announces "
            "them after its answer. Below is every message the client sent and received, and "
            "what the proxy did on the way.",
            "",
            0,
        )
    )
    add("")
    add("  client -> proxy   sent by the client")
    add("  proxy -> client   delivered to the client (written by the agent unless noted)")
    add("  agent -> proxy    written by the agent, stopped by the proxy")
    add("  proxy -> agent    written by the proxy to the agent (the client never saw it)")
    add("  [n]               JSON-RPC request id (requests and their responses)")
    add("  *                 what the proxy did, from the audit log and the agent's own log")
    add("  ($TMP is a temporary directory, removed when the demo ends.)")

    # A dropped agent message is shown after the later of the delivered one the agent sent
    # just before it and the client message the agent had received last when it sent it
    # (keys: indices in run.events; -1: before everything).
    event_of = {a: an.received[pos] for pos, a in enumerate(an.origin) if a is not None}
    drops_after: dict[int, list[int]] = {}
    for j in an.dropped:
        prev = max((a for a in an.origin if a is not None and a < j), default=None)
        after = an.out_after[j] if j < len(an.out_after) else -1
        anchor = max(-1 if prev is None else event_of[prev], an.in_event.get(after, -1))
        drops_after.setdefault(anchor, []).append(j)
    reasons = [
        (str(r.get("event")), str(r.get("reason", "")))
        for r in run.audit
        if r.get("direction") == "agent->client"
        and r.get("event") in ("duplicate_dropped", "notification_dropped", "invalid_message")
    ]
    pos_of_event = {ev_index: pos for pos, ev_index in enumerate(an.received)}
    note_col = COL - 2

    def show_drops(after: int) -> None:
        for j in drops_after.get(after, []):
            msg = an.agent_out[j].get("message")
            lines.extend(_msg_lines(ARROWS["dropped"], msg))
            answer = an.proxy_answers.get(j)
            if answer is None:
                lines.extend(_wrap(_dropped_note(reasons), "* ", note_col))
                continue
            lines.extend(_wrap(_proxy_answer_note(run, msg), "* ", note_col))
            lines.extend(_msg_lines(ARROWS["to_agent"], an.agent_in[answer]))

    show_drops(-1)
    for i, ev in enumerate(run.events):
        if ev.kind == "step":
            add("")
            add(ev.text)
            add("-" * min(WIDTH, len(ev.text)))
            continue
        lines.extend(_msg_lines(ARROWS[ev.direction], ev.message))
        if ev.direction == C2P:
            note = _client_note(run, an, i)
            if note:
                lines.extend(_wrap(note, "* ", note_col))
            show_drops(i)
            continue
        pos = pos_of_event[i]
        msg = ev.message
        _, upd = update_of(msg)
        if an.origin[pos] is None:
            lines.extend(_wrap(_answered_note(msg), "* ", note_col))
        if pos in an.held:
            lines.extend(_wrap(_held_note(run, an, pos), "* ", note_col))
        note = _boundary_note(run, an, pos)
        if note:
            lines.extend(_wrap(note, "* ", note_col))
        cid = upd.get("sessionId")
        if upd.get("sessionUpdate") == "subagent_update" and _first_mention(run, an, pos, cid):
            parent, _ = update_of(msg)
            caps = upd.get("capabilities")
            allowed = (
                f"the client may only {' or '.join(caps)} it"
                if isinstance(caps, dict) and caps
                else "no capabilities: the client may not change it, only read it"
            )
            lines.extend(
                _wrap(
                    f"CHILD ANNOUNCED: the proxy registers {cid} as a child of {parent}; "
                    f"{allowed} (audit: child_announced).",
                    "* ",
                    note_col,
                )
            )
        show_drops(i)

    steps = sum(1 for e in run.events if e.kind == "step")
    title = f"{steps + 1}. the client closes stdin: the proxy closes the agent's stdin and exits"
    add("")
    add(title)
    add("-" * len(title))
    add(f"  proxy exit status: {run.status} (the agent's own exit status)")
    refused = [
        summarize(e.message).split("  ")[0]
        for i, e in enumerate(run.events)
        if e.kind == "message" and e.direction == C2P and i not in an.reached_agent
    ]
    lines.extend(
        _wrap(
            f"the agent received {len(an.agent_in)} messages: "
            + ", ".join(summarize(m).split("  ")[0] for m in an.agent_in)
            + (f"; never the {len(refused)} refused: {', '.join(refused)}" if refused else ""),
            "",
            2,
            4,
        )
    )

    add("")
    add("Audit trail: the JSON lines written to --audit-log, one per event")
    add('("ts" left out; direction shown as a->c = agent->client, c->a = client->agent)')
    add("-" * 72)
    width = max((len(str(r.get("event", "?"))) for r in run.audit), default=0)
    for rec in run.audit:
        rest = {k: v for k, v in rec.items() if k not in ("ts", "event", "direction")}
        arrow = {"client->agent": "c->a", "agent->client": "a->c"}.get(
            str(rec.get("direction")), "    "
        )
        head = f"{rec.get('event', '?'):<{width}} {arrow}  "
        lines.extend(_wrap(json.dumps(rest), head, 2, 2 + len(head) + 1))
    if not run.audit:
        add("  (empty)")

    if run.stderr.strip():
        add("")
        add("Proxy stderr")
        add("-" * 72)
        lines.extend("  " + ln for ln in run.stderr.rstrip().splitlines())

    n = _counts(run, an)
    add("")
    add("Summary")
    add("-" * 72)
    lines.extend(
        _wrap(
            f"The client sent {n['sent']} messages and received {n['received']}; the agent sent "
            f"{len(an.agent_out)} and received {len(an.agent_in)}. The proxy held and released "
            f"{len(an.held)} early messages, removed {n['dup']} duplicate state reports, "
            f"registered {n['children']} child sessions, rejected {n['rejected']} forbidden "
            f"mutation(s) and revoked child grants at {n['revoked']} resume(s).",
            "",
            2,
        )
    )
    add("")
    for c in results:
        mark = "ok  " if c.ok else "FAIL"
        lines.extend(_wrap(c.name + (f" [{c.detail}]" if c.detail else ""), f"[{mark}] ", 2))
    add("")
    if all(c.ok for c in results):
        add("PASS: the proxy did everything shown above.")
        add(f"Use it: put `{prog} [--audit-log FILE] --` in front of your agent's command.")
        add(f"`{prog} demo --json` prints the raw messages of this run as JSON lines.")
    else:
        add("FAIL: some expectations were not met (see [FAIL] above).")
    return "\n".join(lines) + "\n"


def _audit_dir(run: Run) -> str:
    i = run.command.index("--audit-log")
    return os.path.dirname(run.command[i + 1])


def _first_mention(run: Run, an: Analysis, pos: int, cid: Any) -> bool:
    for p in range(pos):
        _, upd = update_of(run.events[an.received[p]].message)
        if upd.get("sessionUpdate") == "subagent_update" and upd.get("sessionId") == cid:
            return False
    return isinstance(cid, str)


def _counts(run: Run, an: Analysis) -> dict[str, int]:
    events = [r.get("event") for r in run.audit]
    return {
        "sent": sum(1 for e in run.events if e.kind == "message" and e.direction == C2P),
        "received": len(an.received),
        "dup": events.count("duplicate_dropped"),
        "children": events.count("child_announced"),
        "rejected": events.count("mutation_rejected"),
        "revoked": events.count("grants_revoked"),
    }


def render_json(run: Run, results: list[Check]) -> str:
    """The raw transcript as JSON lines."""
    out: list[dict[str, Any]] = []
    for ev in run.events:
        if ev.kind == "message":
            out.append({"type": "message", "direction": ev.direction, "message": ev.message})
    for e in run.agent_log:
        out.append({"type": "agent", **e})
    for rec in run.audit:
        out.append({"type": "audit", "record": rec})
    for c in results:
        out.append({"type": "check", "name": c.name, "ok": c.ok, "detail": c.detail})
    out.append({"type": "result", "ok": all(c.ok for c in results), "proxy_status": run.status})
    return "".join(json.dumps(o) + "\n" for o in out)
