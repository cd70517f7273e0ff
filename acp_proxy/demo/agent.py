"""A scripted ACP agent for ``acp-proxy demo`` (stdlib only).

Run as ``python -m acp_proxy.demo.agent``: newline-delimited JSON-RPC on
stdin/stdout. It speaks what ``initialize`` negotiated (``protocolVersion`` 1
is answered 1, anything else 2, the newest it supports) and what the client
advertised:

- **v2** (``acp-proxy demo`` runs it so): ``info`` and ``capabilities`` in the
  ``initialize`` result, ``state_update`` reports, child sessions announced with
  ``subagent_update`` (every v2 client handles them), ``session/prompt``
  answered at acceptance with ``{messageId}``, ``session/request_permission``
  with a ``title`` and a ``subject``.
- **v1**: ``agentInfo`` and ``agentCapabilities`` (``sessionCapabilities.resume``)
  in the ``initialize`` result, only session update kinds of the stable v1
  schema, never ``state_update``; ``session/prompt`` answered with
  ``{stopReason}`` once the turn is over; ``session/request_permission`` with a
  ``toolCall`` (announced first with a ``tool_call`` update) and no ``subject``.
  Child sessions exist only for a client that advertised
  ``clientCapabilities.subagents`` (an object, ``{}`` will do): to any other v1
  client the agent sends no ``subagent_update`` and nothing on a child session
  (docs/protocol.md section 4), and it answers requests naming a child ``-32002``.

It misbehaves on purpose, the way real agents do, so that the proxy has
something to fix (the child-session parts only where children are allowed,
``state_update`` only in v2):

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
- a ``session/prompt`` whose prompt mentions ``tools``: two
  ``session/request_permission`` requests, a web fetch and an edit (the demo's
  policy denies the fetch: the proxy answers it). v2 answers the prompt at
  once; v1 waits for both answers (reporting each tool call ``completed`` when
  an ``allow`` option was selected, else ``failed``) and answers ``end_turn``,
  or ``cancelled`` on a ``session/cancel`` of the session meanwhile.

Every request gets an answer (unknown methods: ``-32601``). When the
environment variable ``ACP_PROXY_DEMO_AGENT_LOG`` names a file, every message
received (``"in"``) and sent (``"out"``) is appended to it as a JSON line
``{"dir": ..., "message": ...}``, so the demo can show what really reached the
agent; messages sent early or as duplicates on purpose carry a ``"note"``
(``"early"`` / ``"duplicate"``; permission requests ``"permission"``). Exits 0
at end of input.
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

INFO = {"name": "acp-proxy-demo-agent", "title": "acp-proxy demo agent", "version": "1.0.0"}

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

    Until ``initialize`` it behaves as a v2 agent (:attr:`version` 2).
    """

    def __init__(self, out: IO[str], log: IO[str] | None = None) -> None:
        self._out = out
        self._log = log
        self.version: int = 2
        """The negotiated protocol version: 1 or 2."""
        self.subagents: bool = True
        """Whether child sessions may be shown: v2, or v1 with ``clientCapabilities.subagents``."""
        self._sessions: list[str] = []
        self._children: dict[str, str] = {}  # child -> parent
        # child -> its announcement fields as last sent: {"title", "description",
        # "capabilities" (an object; {} permits nothing), "state" (a snapshot)}
        self._info: dict[str, JsonObj] = {}
        # sessions resumed whose children have not been re-announced since
        self._resumed: set[str] = set()
        self._prompts = 0
        # v1 only: the tools turn waiting for permission answers: (prompt id, session id),
        # and the permission requests still unanswered: request id -> toolCallId
        self._turn: tuple[Any, str] | None = None
        self._asks: dict[str, str] = {}

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
        """Sends one ``session/update``, unless the negotiated version and the client's
        capabilities forbid it: ``state_update`` only in v2; ``subagent_update`` and
        anything on a child session only when :attr:`subagents`."""
        kind = update.get("sessionUpdate")
        if kind == "state_update" and self.version == 1:
            return
        if not self.subagents and (kind == "subagent_update" or session_id in self._children):
            return
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
            self._answered(msg)
            return
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" in msg:
            self._request(msg["id"], method, params)
        elif method == "session/cancel":
            self._cancel(params)

    def _request(self, rid: Any, method: str, params: JsonObj) -> None:
        sid = params.get("sessionId")
        if method == "initialize":
            self._initialize(rid, params)
        elif method == "session/new":
            new = PARENT if not self._sessions else f"{PARENT}_{len(self._sessions) + 1}"
            self._sessions.append(new)
            # Too early: the client cannot know this session id yet.
            self._update(new, _text_chunk("m-warmup", "warming up"), "early")
            self._result(rid, {"sessionId": new})
        elif method == "session/prompt" and "tools" in json.dumps(params.get("prompt")):
            self._tools(rid, sid)
        elif method == "session/prompt":
            self._prompt(rid, sid)
        elif method == "session/resume":
            self._resume(rid, sid)
        else:
            self._error(rid, -32601, f"method not found: {method}")

    def _initialize(self, rid: Any, params: JsonObj) -> None:
        """Negotiates the version (1 if asked, else 2) and, in v1, whether the client
        opted into subagents (``clientCapabilities.subagents`` an object)."""
        asked = params.get("protocolVersion")
        self.version = 1 if type(asked) is int and asked == 1 else 2
        if self.version == 1:
            caps = params.get("clientCapabilities")
            self.subagents = isinstance(caps, dict) and isinstance(caps.get("subagents"), dict)
            self._result(
                rid,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": False,
                        "sessionCapabilities": {"resume": {}},
                    },
                    "authMethods": [],
                    "agentInfo": dict(INFO),
                },
            )
            return
        self.subagents = True
        self._result(rid, {"protocolVersion": 2, "info": dict(INFO), "capabilities": {}})

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
        if not self.subagents:
            # A v1 client that did not opt into subagents: the work is done in the session.
            self._update(sid, _text_chunk("m-plan", "I'll look this up and review the patch."))
            self._update(
                sid, _text_chunk("m-done", "Found the session API; 2 problems in the diff.")
            )
            self._prompt_result(rid, user_message)
            return
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
        """A prompt asking for tools: two ``session/request_permission`` requests, a web
        fetch (the demo's policy denies it: the proxy answers) and an edit (no rule: the
        client is asked). v2: a ``title`` and a ``subject``, then the prompt's answer at
        once. v1: each tool call announced with a ``tool_call`` update, the request
        naming it in ``toolCall``; the prompt is answered once both are (:meth:`_answered`)."""
        self._prompts += 1
        if self.version == 1:
            if not isinstance(sid, str) or sid not in self._sessions:
                self._error(rid, -32002, f"session not found: {sid!r}")
                return
            self._turn = (rid, sid)
        for kind, title, raw in (
            ("fetch", "Fetch https://example.com", {"url": "https://example.com"}),
            ("edit", "Edit README.md", {"path": "README.md"}),
        ):
            call = {"toolCallId": f"call-{kind}", "name": kind, "kind": kind, "title": title}
            options = [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
            if self.version == 1:
                tool_call = {"sessionUpdate": "tool_call", **call}
                self._update(sid, {**tool_call, "status": "pending", "rawInput": raw})
                params: JsonObj = {"sessionId": sid, "toolCall": call, "options": options}
                self._asks[f"perm-{kind}"] = call["toolCallId"]
            else:
                params = {
                    "sessionId": sid,
                    "title": f"Allow: {title}?",
                    "subject": {"type": "tool_call", "toolCall": call},
                    "options": options,
                }
            message = {
                "jsonrpc": "2.0",
                "id": f"perm-{kind}",
                "method": PERMISSION,
                "params": params,
            }
            self._send(message, "permission")
        if self.version != 1:
            self._prompt_result(rid, f"m-user-{self._prompts}")

    def _answered(self, msg: JsonObj) -> None:
        """A response from the client. v1: the answer to a pending permission request
        reports its tool call ``completed`` (option ``allow`` selected) or ``failed``
        and, once none is pending, ends the tools turn (``end_turn``). Anything else is
        ignored."""
        rid = msg.get("id")
        call = self._asks.pop(rid, None) if isinstance(rid, str) else None
        if call is None or self._turn is None:
            return
        prompt_id, sid = self._turn
        result = msg.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) else None
        allowed = (
            isinstance(outcome, dict) and outcome.get("outcome") == "selected" and chosen == "allow"
        )
        status = "completed" if allowed else "failed"
        self._update(
            sid, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": status}
        )
        if not self._asks:
            self._turn = None
            self._result(prompt_id, {"stopReason": "end_turn"})

    def _children_of(self, sid: str) -> list[str]:
        return [c for c, parent in self._children.items() if parent == sid]

    def _prompt_result(self, rid: Any, user_message: str) -> None:
        if self.version == 1:
            self._result(rid, {"stopReason": "end_turn"})
        else:
            self._result(rid, {"messageId": user_message})

    def _cancel(self, params: JsonObj) -> None:
        sid = params.get("sessionId")
        if self._turn is not None and sid == self._turn[1]:
            # v1: the tools turn ends cancelled; later permission answers are ignored.
            rid, _ = self._turn
            self._turn = None
            self._asks.clear()
            self._result(rid, {"stopReason": "cancelled"})
            return
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
