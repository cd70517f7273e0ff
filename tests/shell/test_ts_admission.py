"""Interop (issue 26): the TypeScript SDK's client over WebSocket (``--listen``) gets
the refusal of a ``session/new`` with a stdio MCP server as an ordinary JSON-RPC
error (code, message, ``data.rule``) and goes on with the connection."""

from __future__ import annotations

import json

import trio
from support.wskit import TS_SDK_CACHE, TS_WS_CLIENT, listening, make_config

TIMEOUT = 60


async def test_the_ts_sdk_client_gets_the_admission_refusal_as_an_error(
    ts_ws_node: list[str],
) -> None:
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as url:
            done = await trio.run_process(
                [*ts_ws_node, str(TS_WS_CLIENT), str(TS_SDK_CACHE), url, "admission"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout)
    refused = out["refused"]
    assert refused["code"] == -32602
    assert "admission.mcp_stdio" in refused["message"]
    assert refused["data"]["rule"] == "admission.mcp_stdio"
    assert refused["data"]["field"] == "mcpServers[0]"
    assert out["sessionId"] == "sess-1"  # the refused one never reached the agent
