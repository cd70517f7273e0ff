"""WebSocket text frames that are not one valid JSON text are refused whole, never repaired."""

from __future__ import annotations

import contextlib
import io
import json

import trio
from support.wskit import AcpClient, connect, listening, make_config
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from acp_proxy.config import Config
from acp_proxy.core.actions import Audit, Peer, Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.transport.websocket import WebSocketTransport, open_websocket_client

TIMEOUT = 30

#: a raw newline inside a JSON string: invalid JSON (a space there would make it valid)
NEWLINE_IN_STRING = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"a\nb"}}'
#: two messages on two lines in one frame
TWO_LINES = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
    '{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}'
)


async def test_client_frame_that_is_not_json_gets_one_parse_error_and_is_not_forwarded() -> None:
    """Each invalid frame: one -32700 with id null, audited; the agent never sees it."""
    stream = io.StringIO()
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), audit=AuditLog(stream)) as url, connect(url) as ws:
            client = AcpClient(ws)
            for frame in (NEWLINE_IN_STRING, TWO_LINES):
                await ws.send_message(frame)
                answer = await client.receive()
                assert answer["id"] is None
                assert answer["error"]["code"] == -32700
            # Had the agent got either frame, its answers (ids 1, 2) would come first.
            await client.send({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}})
            assert (await client.receive())["id"] == 3
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    invalid = [r for r in records if r["event"] == "invalid_message"]
    assert len(invalid) == 2
    assert all(r.get("id") is None for r in invalid)
    assert all("not valid JSON" in r["reason"] for r in invalid)


async def test_agent_frame_that_is_not_json_is_dropped_and_audited() -> None:
    """``--connect``: an agent frame with a raw newline in a string never reaches the client."""

    async def agent(request: WebSocketRequest) -> None:
        ws = await request.accept()
        for frame in (
            NEWLINE_IN_STRING.replace('"id":1,', ""),
            TWO_LINES,
            '{"jsonrpc":"2.0",\n"method":"_ok"}',
        ):
            await ws.send_message(frame)
        with contextlib.suppress(ConnectionClosed):
            await ws.get_message()  # until the client closes

    core = ProxyCore(Config())
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, agent, "127.0.0.1", 0, None)
            async with open_websocket_client(
                "127.0.0.1",
                server.port,
                "/",
                secure=False,
                headers=[],
                max_message_bytes=1 << 20,
                connect_timeout_seconds=10,
            ) as ws:
                transport = WebSocketTransport(ws, Peer.AGENT, 1 << 20)
                actions = []
                frames = 0
                while frames < 3:  # the frames may arrive in one batch or several
                    batch = await transport.receive_batch()
                    assert batch is not None
                    frames += len(batch)
                    actions += core.receive(Peer.AGENT, batch, 0.0)  # type: ignore[arg-type]
                assert frames == 3
            nursery.cancel_scope.cancel()
    sends = [a for a in actions if isinstance(a, Send)]
    # Only the valid multi-line frame passes, as one line (its newline was whitespace).
    assert [json.loads(s.data) for s in sends] == [{"jsonrpc": "2.0", "method": "_ok"}]
    assert b"\n" not in sends[0].data
    dropped = [a for a in actions if isinstance(a, Audit) and a.event == "invalid_message"]
    assert len(dropped) == 2
    stats = core.statistics()
    assert stats.accepted == stats.forwarded + stats.dropped == 3
