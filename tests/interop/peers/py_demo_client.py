#!/usr/bin/env python3
"""An ACP v1 client on the official Python SDK that drives acp-proxy's demo agent
(``python -m acp_proxy.demo.agent``) and reports what it received and what the SDK
made of it.

usage: py_demo_client.py -- AGENT_CMD [ARGS...]

Spawns the agent command (the proxy, or the agent directly) with
``acp.spawn_agent_process`` and runs: initialize (v1, no subagents: the SDK's
stable schema has none) -> session/new -> prompt "Find the session/new docs and
review my patch." -> prompt "Use your tools." (each permission request answered
with its allow_once option) -> session/resume -> prompt "Carry on.".

Prints one JSON object to stdout::

    {"client": "python", "initialize": {"protocolVersion", "agentInfo",
     "resume": bool (agentCapabilities.sessionCapabilities.resume advertised)},
     "sessionId", "stopReasons": [...], "received": [raw message, ...],
     "handled": {"updates": [{"sessionId", "sessionUpdate"}], "permissions":
     [{"sessionId", "toolCallId", "kind"}]}, "sdkErrors": [text, ...]}

``received``: every message from the agent, raw, in wire order (the SDK's own
stream, before dispatch); ``handled``: what reached this client's handlers, as
the SDK parsed it; ``sdkErrors``: what the SDK logged (a message it could not
parse is logged and dropped). Exits 0 when the scenario ran to its end, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from acp import spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import AllowedOutcome, Implementation, RequestPermissionResponse


class Recorder(logging.Handler):
    """Keeps every log record of level ERROR or above, as text."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


class DemoClient:
    """Duck-typed ``acp.Client``: records what reaches it, allows every permission once."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(
            {"sessionId": session_id, "toolCallId": tool_call.tool_call_id, "kind": tool_call.kind}
        )
        option = next((o for o in options if o.kind == "allow_once"), options[0])
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append({"sessionId": session_id, "sessionUpdate": update.session_update})


async def scenario(cmd: list[str], errors: Recorder) -> dict[str, Any]:
    received: list[dict[str, Any]] = []

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            received.append(event.message)

    client = DemoClient()
    out: dict[str, Any] = {"client": "python"}
    async with spawn_agent_process(
        client,
        cmd[0],
        *cmd[1:],
        env=dict(os.environ),
        transport_kwargs={"stderr": None},
        observers=[observe],
    ) as (conn, _process):
        init = await conn.initialize(
            protocol_version=1,
            client_info=Implementation(name="acp-proxy-py-demo-client", version="0.1.0"),
        )
        caps = init.agent_capabilities
        sessions = caps.session_capabilities if caps is not None else None
        out["initialize"] = {
            "protocolVersion": init.protocol_version,
            "agentInfo": init.agent_info.name if init.agent_info is not None else None,
            "resume": sessions is not None and sessions.resume is not None,
        }
        cwd = os.getcwd()
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        out["sessionId"] = sid
        stops = []
        for text in ("Find the session/new docs and review my patch.", "Use your tools."):
            stops.append((await conn.prompt(session_id=sid, prompt=[text_block(text)])).stop_reason)
        await conn.resume_session(session_id=sid, cwd=cwd, mcp_servers=[])
        stops.append(
            (await conn.prompt(session_id=sid, prompt=[text_block("Carry on.")])).stop_reason
        )
        out["stopReasons"] = stops
    out["received"] = received
    out["handled"] = {"updates": client.updates, "permissions": client.permissions}
    out["sdkErrors"] = errors.texts
    return out


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit(__doc__)
    cmd = argv[argv.index("--") + 1 :]
    errors = Recorder()
    logging.getLogger().addHandler(errors)
    try:
        out = asyncio.run(asyncio.wait_for(scenario(cmd, errors), 30))
    except Exception as exc:
        print(f"[py-demo-client] FAIL: {exc!r}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
