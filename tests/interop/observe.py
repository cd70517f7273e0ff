"""Running an SDK client against an agent (directly or through the proxy) and
reducing what it observed to a comparable summary.

A client report (printed by ``peers/py_sdk_client.py`` and ``ts/client.mjs``) is::

    {"client": "python" | "ts", "protocolVersion": 1, "sessionId": "...",
     "stopReasons": ["end_turn", ...], "turns": [[raw message, ...], ...],
     "child": "...", "childPrompt": {"code": ..., "message": ..., "data": ...}}

``turns[i]`` holds every message the client received during prompt ``i``, raw,
in wire order (taken from the SDK's own stream, before dispatch).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
PY_AGENT = [sys.executable, str(HERE / "peers" / "py_sdk_agent.py")]
PY_CLIENT = [sys.executable, str(HERE / "peers" / "py_sdk_client.py")]


def ts_agent(*flags: str) -> list[str]:
    return ["node", str(HERE / "ts" / "agent.mjs"), *flags]


def ts_client(*flags: str) -> list[str]:
    return ["node", str(HERE / "ts" / "client.mjs"), *flags]


def ts_agent_v2(log: Path) -> list[str]:
    """The draft-v2 TypeScript SDK agent (``ts/agent_v2.mjs``), logging each handler
    invocation to ``log``."""
    return ["node", str(HERE / "ts" / "agent_v2.mjs"), "--log", str(log)]


def ts_client_v2() -> list[str]:
    """The draft-v2 TypeScript SDK client (``ts/client_v2.mjs``)."""
    return ["node", str(HERE / "ts" / "client_v2.mjs")]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (an agent's handler log, an audit log)."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def proxy(audit_log: Path) -> list[str]:
    """The proxy command line put in front of an agent command."""
    return [sys.executable, "-m", "acp_proxy", "--audit-log", str(audit_log), "--"]


async def run_client(
    client: Sequence[str], agent: Sequence[str], ts_sdk_dir: Path | None = None
) -> dict[str, Any]:
    """Runs ``client -- agent`` and returns the client's report (asserting it succeeded)."""
    env = dict(os.environ)
    if ts_sdk_dir is not None:
        env["ACP_TS_SDK_DIR"] = str(ts_sdk_dir)
    done = await trio.run_process(
        [*client, "--", *agent], capture_stdout=True, capture_stderr=True, env=env, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"client failed ({done.returncode}):\n{stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    report["stderr"] = stderr
    return report


def _event(message: dict[str, Any], parent: str) -> str:
    if "method" not in message:
        if "error" in message:
            return f"error:{message['error'].get('code')}"
        return f"result:{(message.get('result') or {}).get('stopReason')}"
    params = message.get("params") or {}
    who = "parent" if params.get("sessionId") == parent else "child"
    if message["method"] == "session/request_permission":
        return f"{who}:permission"
    if message["method"] != "session/update":
        return f"{who}:{message['method']}"
    update = params["update"]
    kind = update["sessionUpdate"]
    if kind == "tool_call_update":
        return f"{who}:{kind}:{update.get('status')}"
    if kind == "subagent_update":
        state = update.get("state") or {}
        text = f"{who}:{kind}:{state.get('state')}"
        if state.get("stopReason"):
            text += f"/{state['stopReason']}"
        if "capabilities" in update:
            text += f" caps={json.dumps(update['capabilities'], sort_keys=True)}"
        return text
    return f"{who}:{kind}"


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """What must be the same whichever way a run went: protocol version, stop reasons,
    and per turn the kinds of messages received in order. In the second (cancelled)
    turn the number of streamed chunks depends on timing, so repeats are collapsed
    and only "at least three chunks" is kept."""
    parent = report["sessionId"]
    first, second = ([_event(m, parent) for m in turn] for turn in report["turns"])
    collapsed = [e for i, e in enumerate(second) if i == 0 or e != second[i - 1]]
    chunks = sum(e.endswith(":agent_message_chunk") for e in second)
    return {
        "protocolVersion": report["protocolVersion"],
        "stopReasons": report["stopReasons"],
        "turn1": first,
        "turn2": collapsed,
        "turn2_chunks_at_least_3": chunks >= 3,
    }


PLAIN = {
    "protocolVersion": 1,
    "stopReasons": ["end_turn", "cancelled"],
    "turn1": [
        "parent:agent_message_chunk",
        "parent:agent_message_chunk",
        "parent:agent_message_chunk",
        "parent:tool_call",
        "parent:permission",
        "parent:tool_call_update:in_progress",
        "parent:tool_call_update:completed",
        "parent:agent_message_chunk",
        "result:end_turn",
    ],
    "turn2": ["parent:agent_message_chunk", "result:cancelled"],
    "turn2_chunks_at_least_3": True,
}

SUBAGENTS = {
    "protocolVersion": 1,
    "stopReasons": ["end_turn", "end_turn"],
    "turn1": [
        "parent:agent_message_chunk",
        'parent:subagent_update:running caps={"cancel": {}}',
        "child:agent_message_chunk",
        "child:agent_message_chunk",
        "child:tool_call",
        "parent:subagent_update:requires_action",
        "child:permission",
        "parent:subagent_update:running",
        "child:tool_call_update:in_progress",
        "child:tool_call_update:completed",
        "parent:subagent_update:idle/end_turn",
        "parent:agent_message_chunk",
        "result:end_turn",
    ],
    "turn2": [
        "parent:agent_message_chunk",
        "parent:subagent_update:running",
        "child:agent_message_chunk",
        # Only sent once the agent got the client's session/cancel for the child.
        "parent:subagent_update:idle/cancelled",
        "parent:agent_message_chunk",
        "result:end_turn",
    ],
    "turn2_chunks_at_least_3": True,
}


def read_audit(path: Path) -> list[dict[str, Any]]:
    """The proxy's audit records, without the chain's ``run_started`` / ``run_closed`` and
    without the asks forwarded to the client and its answers (records of what passed)."""
    return [
        r
        for r in read_jsonl(path)
        if r.get("event") not in ("run_started", "run_closed", "permission_answered")
        and not (r.get("event") == "permission_decided" and r.get("action") == "ask")
    ]
