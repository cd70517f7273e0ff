"""The benchmark's agent (``python -m benchmarks.peer``): stdlib only, no trio.

A scripted ACP agent for :mod:`benchmarks.bench`. It answers ``initialize``,
``session/new`` (ids ``s0``, ``s1``, ...) and ``bench/echo`` requests at
once, and on a ``bench/go`` notification writes one workload as fast as it
can, then a ``bench/done`` notification (no ``sessionId``, so never held).
It exits when its stdin ends.

``bench/go`` params:

- ``{"kind": "stream", "count": N, "size": BYTES, "sessions": [ids]}``:
  ``N`` ``agent_message_chunk`` notifications of about ``BYTES`` bytes each,
  round-robin over ``sessions``;
- ``{"kind": "flood", "count": N, "size": BYTES, "block": B}``: the same
  chunks for never-announced sessions ``ghost-0``, ``ghost-1``, ... (``B``
  consecutive lines each);
- ``{"kind": "mixed", "turns": N}``: ``N`` realistic turns on ``s0`` with
  two children (announcements, child traffic, state reports, duplicates).

The lines are built before the first one is written; output goes through
one 64 KiB buffered writer (flushed at the end of the workload), like an
agent that writes as fast as its pipe allows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["flood_lines", "main", "mixed_turn", "stream_line", "stream_lines"]

_POOL = 64  # distinct lines per session, cycled


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _chunk(sid: str, text: str) -> bytes:
    return _dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        }
    )


def stream_line(sid: str, size: int, seq: int) -> bytes:
    """One ``agent_message_chunk`` notification of ``size`` bytes (newline included).

    Args:
        sid: the session id.
        size: target length in bytes (at least the empty envelope's length).
        seq: varies the text, so lines are not identical.
    """
    empty = len(_chunk(sid, ""))
    words = f"chunk {seq} of the answer, with some prose in it. "
    fill = max(0, size - empty)
    text = (words * (fill // len(words) + 1))[:fill]
    return _chunk(sid, text)


def stream_lines(count: int, size: int, sessions: list[str]) -> Iterator[bytes]:
    """``count`` pre-built lines, round-robin over ``sessions``."""
    distinct = max(1, min(_POOL, count, (8 << 20) // max(size, 1)))
    pool = {sid: [stream_line(sid, size, k) for k in range(distinct)] for sid in sessions}
    n_sessions = len(sessions)
    for i in range(count):
        sid = sessions[i % n_sessions]
        lines = pool[sid]
        yield lines[(i // n_sessions) % len(lines)]


def flood_lines(count: int, size: int, block: int) -> Iterator[bytes]:
    """``count`` lines for never-announced sessions ``ghost-0``, ``ghost-1``, ...

    Each ghost session gets ``block`` consecutive lines, so new unknown
    sessions keep arriving and the proxy's hold buffer stays full.
    """
    for g in range(0, count, block):
        sid = f"ghost-{g // block}"
        lines = [stream_line(sid, size, k) for k in range(4)]
        for i in range(min(block, count - g)):
            yield lines[i % 4]


def _update(sid: str, update: dict[str, Any]) -> bytes:
    return _dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": sid, "update": update},
        }
    )


def mixed_turn(turn: int, parent: str = "s0") -> list[bytes]:
    """One realistic agent turn on ``parent`` with two children.

    Returns the lines of the turn: the parent's state report (sent twice:
    one duplicate), one early chunk of the second child (before its
    announcement: the proxy holds it), two ``subagent_update``
    announcements mirroring the children's state (each repeated: the repeat
    is a duplicate the proxy removes), child chunks and tool calls, child
    state reports (with duplicates), a ``session_message`` between the
    children, the children's idle mirrors (repeated) and the parent's
    answer chunks.
    """
    kids = [f"{parent}-t{turn}-c{k}" for k in range(2)]
    out: list[bytes] = []
    running = {"sessionUpdate": "state_update", "state": "running"}
    out += [_update(parent, running), _update(parent, running)]
    out.append(stream_line(kids[1], 300, -1))  # early child traffic: held until announced
    for k, cid in enumerate(kids):
        ann: dict[str, Any] = {
            "sessionUpdate": "subagent_update",
            "sessionId": cid,
            "title": f"Subtask {k}",
            "description": "Reads the code and reports back",
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
        }
        out.append(_update(parent, ann))
        out.append(_update(parent, {**ann}))  # repeated mirror: a duplicate
    for step in range(20):
        for cid in kids:
            out.append(stream_line(cid, 600, step))
            if step % 5 == 0:
                out.append(
                    _update(
                        cid,
                        {
                            "sessionUpdate": "tool_call",
                            "toolCallId": f"{cid}-tool{step}",
                            "title": "Read file",
                            "kind": "read",
                            "status": "pending",
                        },
                    )
                )
                st = {"sessionUpdate": "state_update", "state": "running", "step": step}
                out += [_update(cid, st), _update(cid, st)]  # duplicate report
    out.append(
        _update(
            parent,
            {
                "sessionUpdate": "session_message",
                "messageId": f"m{turn}",
                "senderSessionId": kids[0],
                "recipientSessionId": kids[1],
                "content": {"type": "text", "text": "found it"},
            },
        )
    )
    for cid in kids:
        idle = {"state": "idle"}
        out.append(_update(cid, {"sessionUpdate": "state_update", **idle}))
        mirror = {"sessionUpdate": "subagent_update", "sessionId": cid, "state": idle}
        out += [_update(parent, mirror), _update(parent, mirror)]
    for step in range(20):
        out.append(stream_line(parent, 1024, step))
    idle_parent = {"sessionUpdate": "state_update", "state": "idle"}
    out += [_update(parent, idle_parent), _update(parent, idle_parent)]
    return out


def _respond(rid: Any, result: Any) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> int:
    """Serves one connection on stdin/stdout; returns 0 at end of input."""
    out = open(sys.stdout.fileno(), "wb", buffering=64 * 1024, closefd=False)  # noqa: SIM115
    inp = sys.stdin.buffer
    n_sessions = 0
    for raw in inp:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        method = msg.get("method")
        rid = msg.get("id")
        if method == "initialize":
            out.write(_respond(rid, {"protocolVersion": 1, "agentCapabilities": {}}))
        elif method == "session/new":
            out.write(_respond(rid, {"sessionId": f"s{n_sessions}"}))
            n_sessions += 1
        elif method == "bench/echo":
            out.write(_respond(rid, {}))
        elif method == "bench/go":
            p = msg.get("params") or {}
            lines: list[bytes]
            if p.get("kind") == "mixed":
                lines = [ln for t in range(int(p["turns"])) for ln in mixed_turn(t)]
            elif p.get("kind") == "flood":
                lines = list(flood_lines(int(p["count"]), int(p["size"]), int(p["block"])))
            else:
                lines = list(stream_lines(int(p["count"]), int(p["size"]), list(p["sessions"])))
            for line in lines:
                out.write(line)
            del lines
            out.write(_dumps({"jsonrpc": "2.0", "method": "bench/done", "params": {}}))
        elif rid is not None and method is not None:
            out.write(
                _dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
            )
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
