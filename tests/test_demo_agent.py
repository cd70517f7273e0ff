"""The demo agent (``acp_proxy.demo.agent``) in process: it speaks only what the
negotiated ``protocolVersion`` and the client's capabilities allow.

- a v1 client without ``clientCapabilities.subagents``: stable-v1 session update
  kinds on its own session only, v1 ``initialize`` and permission shapes;
- a v1 client that opted in: ``subagent_update`` and child traffic too, never
  ``state_update``;
- a v2 client: both (what ``acp-proxy demo`` shows).

v1 messages are also parsed with the official Python SDK's schema models
(``acp.schema``, the stable v1 schema), which reject what v1 does not have.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from acp.schema import (
    InitializeResponse,
    PromptResponse,
    RequestPermissionRequest,
    SessionNotification,
)
from support.demo_shapes import (
    V1_INITIALIZE_FIELDS,
    V1_STABLE_KINDS,
    V1_SUBAGENT_KINDS,
    V2_INITIALIZE_FIELDS,
    permission_requests,
    session_updates,
)

from acp_proxy.demo.agent import PARENT, REVIEW, SEARCH, DemoAgent

CHILDREN = {SEARCH, REVIEW}
WORK = [{"type": "text", "text": "Find the session/new docs and review my patch."}]
TOOLS = [{"type": "text", "text": "Use your tools: fetch the page, then edit README.md."}]
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject"}}


class Driver:
    """A :class:`DemoAgent` writing to memory; :meth:`send` returns what it answered."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.agent = DemoAgent(self.out)
        self.sent: list[dict[str, Any]] = []
        self._read = 0

    def send(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        self.agent.handle_line(json.dumps(msg))
        lines = self.out.getvalue().splitlines()
        new = [json.loads(x) for x in lines[self._read :]]
        self._read = len(lines)
        self.sent.extend(new)
        return new

    def request(self, rid: Any, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def cancel(self, sid: str) -> list[dict[str, Any]]:
        params = {"sessionId": sid}
        return self.send({"jsonrpc": "2.0", "method": "session/cancel", "params": params})

    def answer(self, rid: Any, result: dict[str, Any]) -> list[dict[str, Any]]:
        return self.send({"jsonrpc": "2.0", "id": rid, "result": result})


def _v1_init(client_caps: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": 1}
    if client_caps is not None:
        params["clientCapabilities"] = client_caps
    return params


def _result(messages: list[dict[str, Any]], rid: Any) -> Any:
    (found,) = [m for m in messages if m.get("id") == rid and "method" not in m]
    return found.get("result", found.get("error"))


def _script(d: Driver, init: dict[str, Any]) -> None:
    """The demo's own session, minus the proxy: initialize, new, a prompt that starts
    children, a cancel of the cancellable child, a resume of the parent, the prompt
    after it, then a prompt asking for tools with both permissions answered."""
    d.request(1, "initialize", init)
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    d.cancel(SEARCH)
    d.request(4, "session/resume", {"sessionId": PARENT, "cwd": "/", "mcpServers": []})
    d.request(5, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    d.request(6, "session/prompt", {"sessionId": PARENT, "prompt": TOOLS})
    for ask in [m for m in d.sent if m.get("method") == "session/request_permission"]:
        d.answer(ask["id"], ALLOW)


# --------------------------------------------------------------------- v1, not opted in


@pytest.mark.parametrize(
    "caps",
    [None, {}, {"subagents": None}, {"subagents": True}, {"fs": {"readTextFile": True}}],
    ids=["no-clientCapabilities", "empty", "subagents-null", "subagents-not-an-object", "fs"],
)
def test_v1_without_subagents_gets_only_stable_v1_updates_on_its_own_session(caps: Any) -> None:
    """Nothing but stable-v1 kinds, and all of them on the parent session: no
    subagent_update, no state_update, nothing on a child; every notification parses
    with the SDK's stable v1 model."""
    d = Driver()
    _script(d, _v1_init(caps))
    updates = session_updates(d.sent)
    kinds = {kind for _, kind in updates}
    assert kinds <= V1_STABLE_KINDS
    assert {"agent_message_chunk", "tool_call", "tool_call_update"} <= kinds
    assert {sid for sid, _ in updates} == {PARENT}
    for m in d.sent:
        if m.get("method") == "session/update":
            SessionNotification.model_validate(m["params"])
    assert d.agent.subagents is False


def test_v1_without_subagents_has_no_child_sessions() -> None:
    """The children the agent would delegate to do not exist for such a client: a
    prompt or a cancel naming one is answered / ignored like any unknown session."""
    d = Driver()
    d.request(1, "initialize", _v1_init({}))
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    assert d.cancel(SEARCH) == []
    out = d.request(4, "session/prompt", {"sessionId": REVIEW, "prompt": WORK})
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32002, "message": "session not found: 'sess_review'"},
        }
    ]


def test_v1_initialize_result_has_the_v1_shape() -> None:
    """``agentCapabilities`` (advertising ``sessionCapabilities.resume``, which the agent
    serves), ``agentInfo``, ``authMethods``; none of v2's ``info`` / ``capabilities``."""
    d = Driver()
    result = _result(d.request(1, "initialize", _v1_init({})), 1)
    assert set(result) <= V1_INITIALIZE_FIELDS
    assert result["protocolVersion"] == 1
    assert result["agentCapabilities"]["sessionCapabilities"]["resume"] == {}
    parsed = InitializeResponse.model_validate(result)
    assert parsed.agent_info is not None
    assert parsed.agent_info.name == "acp-proxy-demo-agent"


def test_v1_permission_requests_have_the_v1_shape_and_end_the_turn_when_answered() -> None:
    """Each permission request names a tool call announced just before it (``tool_call``
    update, then ``toolCall`` in the request, no v2 ``title`` / ``subject``); the
    prompt's ``stopReason`` comes only once both are answered, after the tool calls'
    outcomes (allowed: completed, rejected: failed)."""
    d = Driver()
    d.request(1, "initialize", _v1_init({}))
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    out = d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": TOOLS})
    assert [m.get("method") for m in out] == [
        "session/update",
        "session/request_permission",
        "session/update",
        "session/request_permission",
    ]  # no answer to the prompt yet
    asks = permission_requests(out)
    for announce, ask in zip(out[0::2], out[1::2], strict=True):
        assert announce["params"]["update"]["sessionUpdate"] == "tool_call"
        assert announce["params"]["update"]["toolCallId"] == ask["params"]["toolCall"]["toolCallId"]
    for params in asks:
        assert set(params) == {"sessionId", "toolCall", "options"}
        RequestPermissionRequest.model_validate(params)
    fetch, edit = (m["id"] for m in out if m.get("method") == "session/request_permission")

    first = d.answer(fetch, REJECT)
    assert [m["params"]["update"] for m in first] == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-fetch", "status": "failed"}
    ]
    last = d.answer(edit, ALLOW)
    assert last[0]["params"]["update"]["status"] == "completed"
    assert last[1] == {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
    PromptResponse.model_validate(last[1]["result"])
    assert d.answer(edit, ALLOW) == []  # a repeated answer: nothing pending any more


def test_v1_cancel_during_the_tools_turn_ends_it_cancelled() -> None:
    """A ``session/cancel`` of the session while permissions are pending ends the turn
    with ``cancelled``; answers arriving later change nothing."""
    d = Driver()
    d.request(1, "initialize", _v1_init({}))
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    out = d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": TOOLS})
    assert d.cancel(PARENT) == [{"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}]
    for ask in permission_requests(out):
        assert d.answer(f"perm-{ask['toolCall']['kind']}", ALLOW) == []


def test_v1_resume_is_answered_without_any_update() -> None:
    d = Driver()
    d.request(1, "initialize", _v1_init({}))
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    out = d.request(4, "session/resume", {"sessionId": PARENT, "cwd": "/", "mcpServers": []})
    assert out == [{"jsonrpc": "2.0", "id": 4, "result": {}}]


# ------------------------------------------------------------------------ v1, opted in


def test_v1_with_subagents_gets_child_sessions_but_no_state_update() -> None:
    """``clientCapabilities.subagents: {}``: the children are announced, their traffic
    and mirrors flow (the cancelled child's mirror included), no ``state_update`` ever,
    and the messages are v2's minus its ``state_update`` reports (same order)."""
    v1 = Driver()
    _script(v1, _v1_init({"subagents": {}}))
    updates = session_updates(v1.sent)
    kinds = [kind for _, kind in updates]
    assert set(kinds) <= V1_STABLE_KINDS | V1_SUBAGENT_KINDS
    assert "subagent_update" in kinds
    assert "state_update" not in kinds
    assert {sid for sid, _ in updates} == {PARENT, *CHILDREN}
    mirrors = [
        m["params"]["update"]
        for m in v1.sent
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "subagent_update"
    ]
    cancelled = {"state": "idle", "stopReason": "cancelled"}
    assert {"sessionUpdate": "subagent_update", "sessionId": SEARCH, "state": cancelled} in mirrors

    v2 = Driver()
    _script(v2, {"protocolVersion": 2})
    tools = ("tool_call", "tool_call_update")  # v1's tool calls; v2's requests name them inline
    v2_seq = [u for u in session_updates(v2.sent) if u[1] != "state_update" and u[1] not in tools]
    assert [u for u in updates if u[1] not in tools] == v2_seq


def test_v1_with_subagents_resume_replays_children_then_reannounces() -> None:
    """The freshness boundary, v1: the resume replays both children before its answer
    (no state_update), the next prompt re-announces them with complete capabilities."""
    d = Driver()
    d.request(1, "initialize", _v1_init({"subagents": {}}))
    d.request(2, "session/new", {"cwd": "/", "mcpServers": []})
    d.request(3, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    out = d.request(4, "session/resume", {"sessionId": PARENT, "cwd": "/", "mcpServers": []})
    assert [
        (m["params"]["update"]["sessionId"], m["params"]["update"]["capabilities"])
        for m in out[:-1]
    ] == [
        (SEARCH, {"cancel": {}}),
        (REVIEW, {}),
    ]
    assert out[-1] == {"jsonrpc": "2.0", "id": 4, "result": {}}
    again = d.request(5, "session/prompt", {"sessionId": PARENT, "prompt": WORK})
    assert [u["capabilities"] for u in (m["params"]["update"] for m in again[:2])] == [
        {"cancel": {}},
        {},
    ]
    assert again[-1]["result"] == {"stopReason": "end_turn"}


# --------------------------------------------------------------------------------- v2


def test_v2_gets_state_and_subagent_updates_and_v2_shapes() -> None:
    """What ``acp-proxy demo`` runs: v2 ``initialize`` fields, state_update and
    subagent_update reports, children's traffic, prompts answered at acceptance with
    ``messageId``, permission requests with ``title`` and ``subject``."""
    d = Driver()
    _script(d, {"protocolVersion": 2, "capabilities": {}})
    init = _result(d.sent, 1)
    assert set(init) <= V2_INITIALIZE_FIELDS
    assert init["capabilities"] == {}
    assert init["info"]["name"] == "acp-proxy-demo-agent"
    updates = session_updates(d.sent)
    kinds = {kind for _, kind in updates}
    assert {"state_update", "subagent_update"} <= kinds
    assert {sid for sid, _ in updates} == {PARENT, *CHILDREN}
    assert _result(d.sent, 6) == {"messageId": "m-user-3"}
    asks = permission_requests(d.sent)
    assert len(asks) == 2
    for params in asks:
        assert set(params) == {"sessionId", "title", "subject", "options"}
        assert params["subject"]["type"] == "tool_call"


@pytest.mark.parametrize("asked", [2, 3, 0, None, "1", True, 1.0])
def test_a_version_other_than_1_is_answered_with_2(asked: Any) -> None:
    """1 is answered 1; anything else (a newer version, none, not an integer) with the
    newest the agent speaks, 2, in v2 shapes."""
    d = Driver()
    params = {} if asked is None else {"protocolVersion": asked}
    result = _result(d.request(1, "initialize", params), 1)
    assert result["protocolVersion"] == 2
    assert set(result) <= V2_INITIALIZE_FIELDS
    assert d.agent.version == 2
    assert d.agent.subagents is True
