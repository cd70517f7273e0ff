"""One-line human summaries of the JSON-RPC messages in the demo transcript."""

from __future__ import annotations

import json
from typing import Any

from acp_proxy.demo.transcript import update_of

__all__ = ["summarize"]


def _short(text: Any, limit: int = 60) -> str:
    s = str(text)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _state(state: Any) -> str:
    if state is None:
        return "null (unconfirmed)"
    if not isinstance(state, dict):
        return json.dumps(state)
    s = str(state.get("state"))
    if state.get("stopReason"):
        s += f" ({state['stopReason']})"
    return s


def summarize(msg: Any) -> str:
    """A one-line human summary of a JSON-RPC message."""
    if not isinstance(msg, dict):
        return f"(not JSON) {_short(msg)}"
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    assert isinstance(params, dict)
    if method == "session/update":
        sid, upd = update_of(msg)
        kind = upd.get("sessionUpdate")
        head = f"session/update {sid}: {kind}"
        if kind in ("agent_message_chunk", "user_message_chunk", "agent_thought_chunk"):
            content = upd.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            return f'{head} "{_short(text)}"'
        if kind == "state_update":
            return f"{head} {_state(upd)}"
        if kind == "subagent_update":
            parts = [f"{head} child {upd.get('sessionId')}"]
            if "title" in upd:
                parts.append(f'"{upd["title"]}"')
            if "capabilities" in upd:
                caps = upd["capabilities"]
                names = ", ".join(caps) if isinstance(caps, dict) else "null"
                parts.append(f"capabilities {{{names}}}")
            if "state" in upd:
                parts.append(f"state {_state(upd['state'])}")
            if "_meta" in upd:
                parts.append("+_meta")
            return ", ".join(parts)
        return head
    if method is not None:
        sid = params.get("sessionId")
        head = f"{method}" + (f" {sid}" if sid else "")
        if method == "initialize":
            return f"{head}  protocolVersion {params.get('protocolVersion')}"
        if method == "session/prompt":
            blocks = params.get("prompt")
            text = ""
            if isinstance(blocks, list) and blocks and isinstance(blocks[0], dict):
                text = str(blocks[0].get("text", ""))
            return f'{head}  "{_short(text)}"'
        if "id" not in msg:
            head += "  (notification: no reply expected)"
        return head
    if "error" in msg:
        err = msg["error"] if isinstance(msg["error"], dict) else {}
        return f"error {err.get('code')}: {err.get('message')}"
    result = msg.get("result")
    if isinstance(result, dict):
        if "protocolVersion" in result:
            info = result.get("info") if isinstance(result.get("info"), dict) else {}
            assert isinstance(info, dict)
            return (
                f"result: protocolVersion {result['protocolVersion']}, "
                f"agent {info.get('name')} {info.get('version')}"
            )
        if set(result) == {"sessionId"}:
            return f"result: sessionId {result['sessionId']}"
        if set(result) == {"messageId"}:
            return f"result: prompt accepted (user message {result['messageId']})"
    return f"result: {_short(json.dumps(result))}"
