"""A scripted ACP agent for ``acp-proxy demo`` (stdlib only).

Run as ``python -m acp_proxy.demo.agent``: newline-delimited JSON-RPC on
stdin/stdout, protocol v2 shapes (it accepts whatever ``protocolVersion`` the
client asks for and answers with it). It misbehaves on purpose, the way real
agents do, so that the proxy has something to fix:

- ``session/new``: sends a ``session/update`` for the new session *before*
  the response that tells the client its id.
- ``session/prompt``: reports ``running`` twice (a duplicate), sends a child
  session's message *before* announcing the child, announces two children
  (``sess_search`` may be cancelled, ``sess_review`` permits nothing),
  repeats their state mirrors unchanged (duplicates), then changes one state
  and ends the turn.
- ``session/cancel`` on a child: reports the child idle (``cancelled``).
- ``session/resume`` of a session: replays its children's announcements, each
  with its complete metadata and ``capabilities`` (history: sent *before* the
  response), sends the session's current ``state_update`` (as the v2 schema
  asks, before the response) and answers ``{}``. It re-announces the
  children only when work resumes: the next ``session/prompt`` on that
  session starts with a ``subagent_update`` per child carrying its complete
  current ``capabilities`` (after the response, so they grant again). Until
  then the children's grants stay revoked, which the demo shows.

Every request gets an answer (unknown methods: ``-32601``). When the
environment variable ``ACP_PROXY_DEMO_AGENT_LOG`` names a file, every message
received (``"in"``) and sent (``"out"``) is appended to it as a JSON line
``{"dir": ..., "message": ...}``, so the demo can show what really reached the
agent; messages sent early or as duplicates on purpose carry a ``"note"``
(``"early"`` / ``"duplicate"``). Exits 0 at end of input.
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import IO, Any

__all__ = ["LOG_ENV", "DemoAgent", "main"]

LOG_ENV = "ACP_PROXY_DEMO_AGENT_LOG"

PARENT = "sess_main"
SEARCH = "sess_search"
PERMISSION = "session/request_permission"
REVIEW = "sess_review"

JsonObj = dict[str, Any]


def _text_chunk(message_id: str, text: str) -> JsonObj:
    return {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }


class DemoAgent:
    """The agent's state and script.

    Args:
        out: where messages go (one JSON line each, flushed).
        log: optional log of every message in and out.
    """

    def __init__(self, out: IO[str], log: IO[str] | None = None) -> None:
        self._out = out
        self._log = log
        self._version: int = 2
        self._sessions: list[str] = []
        self._children: dict[str, str] = {}  # child -> parent
        # child -> its announcement fields as last sent: {"title", "description",
        # "capabilities" (an object; {} permits nothing), "state" (a snapshot)}
        self._info: dict[str, JsonObj] = {}
        # sessions resumed whose children have not been re-announced since
        self._resumed: set[str] = set()
        self._prompts = 0

    # ------------------------------------------------------------- output

    def _record(self, direction: str, message: Any, note: str | None = None) -> None:
        if self._log is not None:
            entry = {"dir": direction, "message": message}
            if note:
                entry["note"] = note
            self._log.write(json.dumps(entry) + "\n")
            self._log.flush()

    def _send(self, message: JsonObj, note: str | None = None) -> None:
        self._record("out", message, note)
        self._out.write(json.dumps(message, separators=(",", ":")) + "\n")
        self._out.flush()

    def _result(self, rid: Any, result: JsonObj) -> None:
        self._send({"jsonrpc": "2.0", "id": rid, "result": result})

    def _error(self, rid: Any, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def _update(self, session_id: str, update: JsonObj, note: str | None = None) -> None:
        self._send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            },
            note,
        )

    # -------------------------------------------------------------- input

    def handle_line(self, line: str) -> None:
        """Handles one input line (invalid JSON is answered with ``-32700``)."""
        try:
            msg = json.loads(line)
        except ValueError:
            self._record("in", line)
            self._error(None, -32700, "parse error")
            return
        self._record("in", msg)
        if not isinstance(msg, dict):
            self._error(None, -32600, "invalid request")
            return
        method = msg.get("method")
        if not isinstance(method, str):
            return  # a response to a request we never sent: ignore
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" in msg:
            self._request(msg["id"], method, params)
        elif method == "session/cancel":
            self._cancel(params)

    def _request(self, rid: Any, method: str, params: JsonObj) -> None:
        if method == "initialize":
            pv = params.get("protocolVersion")
            if type(pv) is int:
                self._version = pv
            self._result(
                rid,
                {
                    "protocolVersion": self._version,
                    "info": {
                        "name": "acp-proxy-demo-agent",
                        "title": "acp-proxy demo agent",
                        "version": "1.0.0",
                    },
                    "capabilities": {},
                },
            )
        elif method == "session/new":
            sid = PARENT if not self._sessions else f"{PARENT}_{len(self._sessions) + 1}"
            self._sessions.append(sid)
            # Too early: the client cannot know this session id yet.
            self._update(sid, _text_chunk("m-warmup", "warming up"), "early")
            self._result(rid, {"sessionId": sid})
        elif method == "session/prompt" and "tools" in json.dumps(params.get("prompt")):
            self._tools(rid, params.get("sessionId"))
        elif method == "session/prompt":
            self._prompt(rid, params.get("sessionId"))
        elif method == "session/resume":
            self._resume(rid, params.get("sessionId"))
        else:
            self._error(rid, -32601, f"method not found: {method}")

    def _prompt(self, rid: Any, sid: Any) -> None:
        self._prompts += 1
        user_message = f"m-user-{self._prompts}"
        if sid in self._children:
            # Only reached if a proxy lets a forbidden prompt through.
            self._update(sid, _text_chunk(f"m-child-{self._prompts}", "child prompted"))
            self._prompt_result(rid, user_message)
            return
        if sid not in self._sessions:
            self._error(rid, -32002, f"session not found: {sid!r}")
            return
        if sid in self._resumed and self._children_of(sid):
            self._continue(rid, sid, user_message)
            return
        running = {"sessionUpdate": "state_update", "state": "running"}
        self._update(sid, running)
        self._update(sid, dict(running), "duplicate")
        self._update(sid, _text_chunk("m-plan", "I'll split this between two helpers."))
        # Early child traffic: a message of sess_search before its announcement.
        self._update(
            SEARCH, _text_chunk("m-search-1", "Searching the docs for session/new..."), "early"
        )
        self._children.update({SEARCH: sid, REVIEW: sid})
        self._info[SEARCH] = {
            "title": "Search the docs",
            "description": "Finds the session API in the reference",
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
        }
        self._info[REVIEW] = {
            "title": "Review the patch",
            "description": "Reads the diff and lists problems",
            "capabilities": {},
            "state": {"state": "running"},
        }
        self._update(
            sid,
            {
                "sessionUpdate": "subagent_update",
                "sessionId": SEARCH,
                **self._info[SEARCH],
                "_meta": {"demo.example/role": "researcher"},
            },
        )
        # Announced without capabilities: it permits nothing.
        announce = {k: v for k, v in self._info[REVIEW].items() if k != "capabilities"}
        self._update(sid, {"sessionUpdate": "subagent_update", "sessionId": REVIEW, **announce})
        self._update(REVIEW, _text_chunk("m-review-1", "Found 2 problems in the diff."))
        # Mirrors repeating the children's last state: duplicates.
        for child in (SEARCH, REVIEW):
            self._update(
                sid,
                {
                    "sessionUpdate": "subagent_update",
                    "sessionId": child,
                    "state": {"state": "running"},
                },
                "duplicate",
            )
        # A real state change.
        self._info[REVIEW]["state"] = {"state": "idle", "stopReason": "end_turn"}
        self._update(
            sid,
            {
                "sessionUpdate": "subagent_update",
                "sessionId": REVIEW,
                "state": self._info[REVIEW]["state"],
            },
        )
        self._update(
            sid, _text_chunk("m-done", "Review done; the search continues in the background.")
        )
        self._update(
            sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
        )
        self._prompt_result(rid, user_message)

    def _resume(self, rid: Any, sid: Any) -> None:
        """``session/resume``: the children's history, the current state, ``{}``."""
        if sid in self._children:
            # Only reached if a proxy lets a forbidden resume of a child through.
            self._result(rid, {})
            return
        if sid not in self._sessions:
            self._error(rid, -32002, f"session not found: {sid!r}")
            return
        # Replayed history: each child as it was last reported, capabilities included.
        for child in self._children_of(sid):
            self._update(
                sid, {"sessionUpdate": "subagent_update", "sessionId": child, **self._info[child]}
            )
        # The current state (idle between turns), before the response as the v2 schema asks.
        self._update(
            sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
        )
        self._resumed.add(sid)
        self._result(rid, {})

    def _continue(self, rid: Any, sid: str, user_message: str) -> None:
        """The first prompt after a resume: re-announces every child with its complete
        current capabilities (search running again), then ends the turn."""
        self._resumed.discard(sid)
        self._update(sid, {"sessionUpdate": "state_update", "state": "running"})
        if self._children.get(SEARCH) == sid:
            self._info[SEARCH]["state"] = {"state": "running"}
        for child in self._children_of(sid):
            self._update(
                sid, {"sessionUpdate": "subagent_update", "sessionId": child, **self._info[child]}
            )
        self._update(sid, _text_chunk("m-resumed", "Picking the search up where it stopped."))
        self._update(
            sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
        )
        self._prompt_result(rid, user_message)

    def _tools(self, rid: Any, sid: Any) -> None:
        """A prompt asking for tools: two ``session/request_permission`` requests (v2
        ``subject``), a web fetch (the demo's policy denies it: the proxy answers) and
        an edit (no rule: the client is asked), then the prompt's answer."""
        self._prompts += 1
        for kind, title in (("fetch", "Fetch https://example.com"), ("edit", "Edit README.md")):
            call = {"toolCallId": f"call-{kind}", "name": kind, "kind": kind, "title": title}
            params = {
                "sessionId": sid,
                "title": f"Allow: {title}?",
                "subject": {"type": "tool_call", "toolCall": call},
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            }
            message = {
                "jsonrpc": "2.0",
                "id": f"perm-{kind}",
                "method": PERMISSION,
                "params": params,
            }
            self._send(message, "permission")
        self._prompt_result(rid, f"m-user-{self._prompts}")

    def _children_of(self, sid: str) -> list[str]:
        return [c for c, parent in self._children.items() if parent == sid]

    def _prompt_result(self, rid: Any, user_message: str) -> None:
        if self._version == 1:
            self._result(rid, {"stopReason": "end_turn"})
        else:
            self._result(rid, {"messageId": user_message})

    def _cancel(self, params: JsonObj) -> None:
        sid = params.get("sessionId")
        if not isinstance(sid, str) or sid not in self._children:
            return
        idle = {"state": "idle", "stopReason": "cancelled"}
        if sid in self._info:
            self._info[sid]["state"] = dict(idle)
        self._update(sid, {"sessionUpdate": "state_update", **idle})
        self._update(
            self._children[sid],
            {"sessionUpdate": "subagent_update", "sessionId": sid, "state": idle},
        )


def main() -> int:
    """Serves stdin/stdout until end of input; returns 0 (130 on Ctrl-C, without a
    traceback: the proxy passes SIGINT on to its agent)."""
    path = os.environ.get(LOG_ENV)
    log = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(encoding="utf-8", errors="replace")
    try:
        agent = DemoAgent(sys.stdout, log)
        for line in sys.stdin:
            if line.strip():
                agent.handle_line(line)
    except BrokenPipeError:
        pass
    except KeyboardInterrupt:
        return 130
    finally:
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
