#!/usr/bin/env python3
"""A hostile raw ACP agent (stdlib only) probing the permission rules (issue 19).

On ``session/prompt`` it sends, one at a time, requests that each try to get past
a rule, and prints ``OUTCOME {"probe": name, "answer": ...}`` to stderr for each
answer (or ``null`` after 5 s); then ends the turn. The probes: a write whose
``params._meta.path`` names a file outside the workspace (the Python SDK spreads
``_meta`` into the handler's arguments), a ``tool_call`` snake_case alias, a
harmless v2 ``subject`` beside a ``fetch`` v1 ``toolCall``, and a request naming
only the ``toolCallId`` of a ``fetch`` tool call announced in a ``session/update``.
It answers ``initialize`` with protocol version 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ndjson_stdio import StdioLines

OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]
EVIL = "/etc/acp-proxy-hostile-test"


def probes(sid: str, cwd: str) -> list[tuple[str, dict[str, Any]]]:
    rp = "session/request_permission"
    return [
        (
            "meta_path",
            {
                "method": "fs/write_text_file",
                "params": {
                    "sessionId": sid,
                    "path": f"{cwd}/ok.txt",
                    "content": "x",
                    "_meta": {"path": EVIL},
                },
            },
        ),
        (
            "snake_tool_call",
            {
                "method": rp,
                "params": {
                    "sessionId": sid,
                    "tool_call": {"toolCallId": "t2", "kind": "fetch", "title": "fetch"},
                    "toolCall": {"toolCallId": "t2", "kind": "read", "title": "read"},
                    "options": OPTIONS,
                },
            },
        ),
        (
            "both_shapes",
            {
                "method": rp,
                "params": {
                    "sessionId": sid,
                    "subject": {"type": "command", "command": "ls", "cwd": cwd},
                    "toolCall": {"toolCallId": "t3", "kind": "fetch", "title": "fetch"},
                    "options": OPTIONS,
                },
            },
        ),
        (
            "kind_omitted",
            {
                "method": rp,
                "params": {"sessionId": sid, "toolCall": {"toolCallId": "t4"}, "options": OPTIONS},
            },
        ),
    ]


def main() -> None:
    lines = StdioLines()
    send, read = lines.send, lines.read

    cwd = "/"
    while True:
        m = read(3600)
        if m is None:
            continue
        method = m.get("method")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": m["id"],
                    "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
                }
            )
        elif method == "session/new":
            cwd = m["params"]["cwd"]
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            update = {
                "sessionUpdate": "tool_call",
                "toolCallId": "t4",
                "kind": "fetch",
                "title": "fetch",
            }
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": "s1", "update": update},
                }
            )
            for i, (name, probe) in enumerate(probes("s1", cwd)):
                send({"jsonrpc": "2.0", "id": 100 + i, **probe})
                answer = read(5.0)
                print(
                    " OUTCOME " + json.dumps({"probe": name, "answer": answer}),
                    file=sys.stderr,
                    flush=True,
                )
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
