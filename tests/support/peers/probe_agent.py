#!/usr/bin/env python3
"""A raw ACP v1 agent (stdlib only) that sends the agent->client requests of a probe file.

usage: probe_agent.py PROBES.json

``PROBES.json`` is a list of ``{"name": ..., "method": ..., "params": {...}}``;
in every string of ``params``, ``{sid}`` becomes the session id and ``{cwd}``
the session's cwd; an optional ``"sleep"`` (seconds) waits before the probe.
On ``session/prompt`` the agent sends each probe as a request, one at a time,
prints ``OUTCOME {"probe": name, "answer": ...}`` to stderr for each answer
(``null`` after 10 s), then ends the turn.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from ndjson_stdio import StdioLines


def fill(value: Any, sid: str, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace("{sid}", sid).replace("{cwd}", cwd)
    if isinstance(value, list):
        return [fill(v, sid, cwd) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, sid, cwd) for k, v in value.items()}
    return value


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        probes = json.load(f)
    lines = StdioLines()
    send, read = lines.send, lines.read

    cwd = "/"
    while True:
        m = read(3600)
        if m is None or "method" not in m:
            continue
        method = m["method"]
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            send({"jsonrpc": "2.0", "id": m["id"], "result": result})
        elif method == "session/new":
            cwd = m["params"]["cwd"]
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            for i, probe in enumerate(probes):
                time.sleep(probe.get("sleep", 0))
                params = fill(probe["params"], "s1", cwd)
                send({"jsonrpc": "2.0", "id": 100 + i, "method": probe["method"], "params": params})
                answer = read(10.0)
                print(
                    " OUTCOME " + json.dumps({"probe": probe["name"], "answer": answer}),
                    file=sys.stderr,
                    flush=True,
                )
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
