"""A tiny scripted ACP agent (stdlib only): ndjson over stdio, or imported by a test server.

Behaviour (:meth:`ScriptedAgent.handle`):

* ``initialize`` -> protocolVersion 1; ``session/new`` -> ``sess-N``;
* ``session/prompt`` on a known session: two ``agent_message_chunk`` updates,
  a ``subagent_update`` announcing ``<session>-child`` (state running, no
  capabilities), one chunk on the child, then ``stopReason: end_turn``;
  prompt text ``exit``: answers, then the agent exits with status 3;
* ``session/prompt`` on an unknown session: error -32002 with
  ``data.by == "scripted-agent"`` (so tests can tell it from a proxy answer);
* ``session/prompt`` text ``elicit JSON``: sends ``elicitation/create`` (id
  ``elicit-N``) with the JSON's members and the session's id as params; the
  answer to it comes back as one chunk (``elicited RESULT-JSON``), then the
  prompt's ``end_turn``;
* ``session/load`` / ``session/resume`` / ``session/fork`` -> ``{}`` (fork:
  ``sess-N``);
* any other request: -32601; notifications are ignored.

With ``ACP_TEST_AGENT_LOG`` set, appends ``start PID`` / ``exit PID`` lines there;
with ``ACP_TEST_AGENT_RECEIVED`` set, appends every line received there as is.
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
        # elicitation request id -> (prompt id, session id)
        self.eliciting: dict[str, tuple[Any, str]] = {}

    def handle(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Messages to send in answer to ``msg``, in order."""
        method, rid = msg.get("method"), msg.get("id")
        if method is None and rid in self.eliciting:
            prompt_id, sid = self.eliciting.pop(rid)
            answer = msg.get("result", msg.get("error"))
            done = {"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}}
            return [_chunk(sid, "elicited " + json.dumps(answer)), done]
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
        if method in ("session/load", "session/resume"):
            return [{"jsonrpc": "2.0", "id": rid, "result": {}}]
        if method == "session/fork":
            sid = f"sess-{len(self.sessions) + 1}"
            self.sessions.append(sid)
            return [{"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}}]
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
        if text.startswith("elicit "):
            eid = f"elicit-{len(self.eliciting) + 1}"
            self.eliciting[eid] = (rid, sid)
            asked = {**json.loads(text[len("elicit ") :]), "sessionId": sid}
            return [{"jsonrpc": "2.0", "id": eid, "method": "elicitation/create", "params": asked}]
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
    received = os.environ.get("ACP_TEST_AGENT_RECEIVED")
    for line in sys.stdin.buffer:
        if received:
            with open(received, "ab") as file:
                file.write(line)
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
