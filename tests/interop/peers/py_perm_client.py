#!/usr/bin/env python3
"""An ACP v1 client on the official Python SDK that answers what an agent asks.

usage: py_perm_client.py -- AGENT_CMD [ARGS...]

initialize (v1, ``fs.writeTextFile``) -> session/new (cwd: this directory) -> one
prompt. Permission requests are answered with the allow_once option; file writes
succeed (nothing is written). Prints one JSON object: ``{"protocolVersion",
"sessionId", "stopReason", "permissions": [toolCall kind, ...], "writes": [path, ...],
"methods": [method of every request or notification received, in order]}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp import spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


class AnsweringClient:
    """Duck-typed ``acp.Client``."""

    def __init__(self) -> None:
        self.permissions: list[str | None] = []
        self.writes: list[str] = []

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call.kind)
        option = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def write_text_file(
        self, content: str, path: str, session_id: str, **_: Any
    ) -> WriteTextFileResponse:
        self.writes.append(path)
        return WriteTextFileResponse()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        pass


async def scenario(cmd: list[str]) -> dict[str, Any]:
    methods: list[str] = []

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING and "method" in event.message:
            methods.append(event.message["method"])

    client = AnsweringClient()
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
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
            ),
            client_info=Implementation(name="acp-proxy-py-perm-client", version="0.1.0"),
        )
        session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=session_id, prompt=[text_block("go")])
    return {
        "protocolVersion": init.protocol_version,
        "sessionId": session_id,
        "stopReason": done.stop_reason,
        "permissions": client.permissions,
        "writes": client.writes,
        "methods": methods,
    }


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit(__doc__)
    try:
        out = asyncio.run(asyncio.wait_for(scenario(argv[argv.index("--") + 1 :]), 30))
    except Exception as exc:
        print(f"[py-perm-client] FAIL: {exc!r}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
