#!/usr/bin/env python3
"""An ACP client on the official Python SDK that reports what it observed.

usage: py_sdk_client.py -- AGENT_CMD [ARGS...]

Spawns the agent command (the proxy, or the agent directly) with
``acp.spawn_agent_process`` and runs: initialize (v1) -> session/new ->
prompt "hello there" (permission requests answered with the allow_once
option) -> prompt "slow please", session/cancel after three chunks.

Prints one JSON object to stdout (see ``tests/interop/observe.py`` for the
shape); exits 0 when the scenario ran to its end, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from typing import Any

from acp import spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import AllowedOutcome, Implementation, RequestPermissionResponse


class ObservingClient:
    """Duck-typed ``acp.Client``: allows every permission request once."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.chunks: dict[str, int] = {}

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> RequestPermissionResponse:
        option = next((o for o in options if o.kind == "allow_once"), options[0])
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.chunks[session_id] = self.chunks.get(session_id, 0) + 1
            self.changed.set()

    async def wait_chunks(self, session_id: str, count: int) -> None:
        while self.chunks.get(session_id, 0) < count:
            self.changed.clear()
            await self.changed.wait()


async def scenario(cmd: list[str]) -> dict[str, Any]:
    received: list[dict[str, Any]] = []
    marks: list[int] = []

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            received.append(event.message)

    client = ObservingClient()
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
            client_info=Implementation(name="acp-proxy-py-sdk-client", version="0.1.0"),
        )
        out["protocolVersion"] = init.protocol_version
        session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
        out["sessionId"] = session_id
        stops = []
        marks.append(len(received))
        first = await conn.prompt(session_id=session_id, prompt=[text_block("hello there")])
        stops.append(first.stop_reason)
        marks.append(len(received))
        client.chunks.clear()
        slow = asyncio.ensure_future(
            conn.prompt(session_id=session_id, prompt=[text_block("slow please")])
        )
        await client.wait_chunks(session_id, 3)
        await conn.cancel(session_id=session_id)
        stops.append((await slow).stop_reason)
        marks.append(len(received))
        out["stopReasons"] = stops
    out["turns"] = [received[a:b] for a, b in itertools.pairwise(marks)]
    return out


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit(__doc__)
    cmd = argv[argv.index("--") + 1 :]
    try:
        out = asyncio.run(asyncio.wait_for(scenario(cmd), 30))
    except Exception as exc:
        print(f"[py-sdk-client] FAIL: {exc!r}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
