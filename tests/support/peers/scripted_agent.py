"""A tiny scripted ACP agent (stdlib only): ndjson over stdio, or imported by a test server.

Behaviour (:meth:`ScriptedAgent.handle`):

* ``initialize`` -> protocolVersion 1; ``session/new`` -> ``sess-N``;
* ``session/prompt`` on a known session: two ``agent_message_chunk`` updates,
  a ``subagent_update`` announcing ``<session>-child`` (state running, no
  capabilities), one chunk on the child, then ``stopReason: end_turn``;
  prompt text ``exit``: answers, then the agent exits with status 3;
* ``session/prompt`` on an unknown session: error -32002 with
  ``data.by == "scripted-agent"`` (so tests can tell it from a proxy answer);
* any other request: -32601; notifications are ignored.

With ``ACP_TEST_AGENT_LOG`` set, appends ``start PID`` / ``exit PID`` lines there.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

EXIT_STATUS = 3


def _chunk(session_id: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }


class ScriptedAgent:
    """The agent's logic, transport-free."""

    def __init__(self) -> None:
        self.sessions: list[str] = []
        self.exit_requested = False

    def handle(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Messages to send in answer to ``msg``, in order."""
        method, rid = msg.get("method"), msg.get("id")
        if method is None or rid is None:
            return []
        params = msg.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "authMethods": [],
            }
            return [{"jsonrpc": "2.0", "id": rid, "result": result}]
        if method == "session/new":
            sid = f"sess-{len(self.sessions) + 1}"
            self.sessions.append(sid)
            return [{"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}}]
        if method == "session/prompt":
            return self._prompt(rid, params)
        error = {"code": -32601, "message": f"method not found: {method}"}
        return [{"jsonrpc": "2.0", "id": rid, "error": error}]

    def _prompt(self, rid: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        sid = params.get("sessionId")
        if sid not in self.sessions:
            error = {
                "code": -32002,
                "message": f"session not found: {sid}",
                "data": {"by": "scripted-agent", "sessionId": sid},
            }
            return [{"jsonrpc": "2.0", "id": rid, "error": error}]
        prompt = params.get("prompt") or [{}]
        text = prompt[0].get("text", "")
        done = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}
        if text == "exit":
            self.exit_requested = True
            return [done]
        child = f"{sid}-child"
        announce = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "subagent_update",
                    "sessionId": child,
                    "title": "Search the docs",
                    "state": {"state": "running"},
                },
            },
        }
        return [
            _chunk(sid, "Hello, "),
            _chunk(sid, "world"),
            announce,
            _chunk(child, "child"),
            done,
        ]


def _note(event: str) -> None:
    path = os.environ.get("ACP_TEST_AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(f"{event} {os.getpid()}\n")


def main() -> int:
    """Serves stdin/stdout until EOF (status 0) or an ``exit`` prompt (status 3)."""
    _note("start")
    agent = ScriptedAgent()
    status = 0
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        for out in agent.handle(msg):
            sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        if agent.exit_requested:
            status = EXIT_STATUS
            break
    _note("exit")
    return status


if __name__ == "__main__":
    sys.exit(main())
