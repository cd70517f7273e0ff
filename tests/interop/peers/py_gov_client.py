#!/usr/bin/env python3
"""An ACP v1 client on the official Python SDK whose handlers record what they are handed.

usage: py_gov_client.py -- AGENT_CMD [ARGS...]

initialize (v1: ``fs`` read and write, ``terminal``) -> session/new (cwd: this
directory) -> one prompt. Every governed handler records its arguments *as the
SDK hands them* (after its deserialization) and succeeds: permission requests
are answered allow_once, reads return ``"text"``, writes and terminals succeed
(nothing runs; a write is written only with ``GOV_CLIENT_WRITES=1``). Prints
one JSON object: ``{"stopReason", "handled": [{"method": ..., ...arguments}, ...]}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp import spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


def _write(path: str, content: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)


class RecordingClient:
    """Duck-typed ``acp.Client``: every governed handler appends to :attr:`handled`."""

    def __init__(self) -> None:
        self.handled: list[dict[str, Any]] = []

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> RequestPermissionResponse:
        locations = [loc.path for loc in tool_call.locations or []]
        self.handled.append(
            {"method": "session/request_permission", "kind": tool_call.kind, "paths": locations}
        )
        option = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        self.handled.append({"method": "fs/read_text_file", "path": path})
        return ReadTextFileResponse(content="text")

    async def write_text_file(
        self, content: str, path: str, session_id: str, **_: Any
    ) -> WriteTextFileResponse:
        self.handled.append({"method": "fs/write_text_file", "path": path, "content": content})
        if os.environ.get("GOV_CLIENT_WRITES") == "1":
            await asyncio.to_thread(_write, path, content)  # a real client writes the file
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        **_: Any,
    ) -> CreateTerminalResponse:
        self.handled.append({"method": "terminal/create", "argv": [command, *(args or [])]})
        return CreateTerminalResponse(terminal_id=f"term-{len(self.handled)}")

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        pass


async def scenario(cmd: list[str]) -> dict[str, Any]:
    client = RecordingClient()
    async with spawn_agent_process(
        client, cmd[0], *cmd[1:], env=dict(os.environ), transport_kwargs={"stderr": None}
    ) as (conn, _process):
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            ),
            client_info=Implementation(name="acp-proxy-py-gov-client", version="0.1.0"),
        )
        session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=session_id, prompt=[text_block("go")])
    return {"stopReason": done.stop_reason, "handled": client.handled}


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit(__doc__)
    try:
        out = asyncio.run(asyncio.wait_for(scenario(argv[argv.index("--") + 1 :]), 60))
    except Exception as exc:
        print(f"[py-gov-client] FAIL: {exc!r}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
