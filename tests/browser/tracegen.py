"""Synthetic traces for the browser tests: the record shapes of docs/trace-format.md.

:func:`big_trace` writes N message records without content: a session with
children, prompts and their responses, updates, a held message per child
and its release, refused mutations and dropped duplicates, in the mix a
long agent session produces.
"""

from __future__ import annotations

import json
from typing import Any


def _line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":")) + "\n"


def header(content: bool = False) -> dict[str, Any]:
    """A trace's first record."""
    return {
        "type": "header",
        "format": "acp-proxy-trace",
        "version": 1,
        "content": content,
        "started": "2026-12-01T12:00:00+0000",
        "pid": 1,
        "run": "synthetic",
        "proxy": "0.1.0",
    }


def big_trace(path: str, messages: int) -> int:
    """Writes a trace of ``messages`` message records to ``path``; returns its size in bytes."""
    out = [_line(header())]
    seq = 0
    t = 1000.0

    def msg(**fields: Any) -> dict[str, Any]:
        nonlocal seq, t
        seq += 1
        t += 0.0005
        rec = {
            "type": "message",
            "seq": seq,
            "t": t,
            "dir": "agent->client",
            "kind": "notification",
            "id": None,
            "method": "session/update",
            "session": "S",
            "size": 240,
            "decision": "forwarded",
            "conn": 1,
            "ts": 1796000000.0 + t,
        }
        rec.update(fields)
        out.append(_line(rec))
        return rec

    msg(dir="client->agent", kind="request", id=0, method="session/new", session=None, size=90)
    msg(kind="response", id=0, method=None, session=None, created="S", for_seq=1, duration=0.001)
    n_child = 0
    req = 1
    while seq < messages - 12:
        req += 1
        prompt = msg(dir="client->agent", kind="request", id=req, method="session/prompt", size=180)
        n_child += 1
        child = f"C{n_child}"
        held = msg(
            session=child,
            decision="held",
            events=[{"event": "held", "sessionId": child, "reason": "session not yet known"}],
        )
        msg(
            events=[
                {"event": "child_announced", "sessionId": child, "parentSessionId": "S"},
                {"event": "released", "sessionId": child, "reason": "announced"},
            ]
        )
        release = {k: v for k, v in held.items() if k != "events"}
        release.update(seq=None, of=held["seq"], decision="released")
        out.append(_line(release))
        for _ in range(6):
            msg()
        msg(session=child)
        msg(
            decision="dropped",
            events=[{"event": "duplicate_dropped", "sessionId": "S", "reason": "repeats"}],
        )
        msg(
            dir="client->agent",
            kind="request",
            id=f"r{req}",
            method="session/prompt",
            session=child,
            decision="refused",
            events=[
                {
                    "event": "mutation_rejected",
                    "sessionId": child,
                    "parentSessionId": "S",
                    "reason": "not_allowed_on_child",
                }
            ],
        )
        msg(
            kind="response",
            id=req,
            method=None,
            session=None,
            for_method="session/prompt",
            for_session="S",
            for_seq=prompt["seq"],
            duration=0.004,
        )
    while seq < messages:
        msg()
    text = "".join(out)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return len(text.encode())
