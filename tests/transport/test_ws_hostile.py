"""``--listen`` against hostile WebSocket clients (loopback sockets, run_listen in-process)."""

from __future__ import annotations

import io
import json

import trio

from acp_proxy.audit import AuditLog

from .wskit import AcpClient, connect, listening, make_config, wait_closed

TIMEOUT = 30


async def test_text_over_the_limit_in_bytes_only_closes_with_1009_while_arriving() -> None:
    """A text message within the limit in characters but over it in UTF-8 bytes closes with 1009."""
    stream = io.StringIO()
    cfg = make_config(max_message_bytes=4096)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg, audit=AuditLog(stream)) as url:
            async with connect(url) as ws:
                fits = {"jsonrpc": "2.0", "id": 1, "method": "_x", "params": "\u00e9" * 1900}
                await ws.send_message(json.dumps(fits, ensure_ascii=False))
                answer = json.loads(await ws.get_message())
                assert answer["id"] == 1  # the agent's -32601: the message crossed
                await AcpClient(ws).start_session()
            async with connect(url) as ws:
                # 1,500 characters, 6,000 bytes: trio-websocket alone counts characters.
                wide = {"jsonrpc": "2.0", "method": "_x", "params": "\U0001f600" * 1500}
                await ws.send_message(json.dumps(wide, ensure_ascii=False))
                reason = await wait_closed(ws)
                assert reason.code == 1009
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    oversize = [r for r in records if r["event"] == "oversize_message"]
    assert [r["connection"] for r in oversize] == [2]
