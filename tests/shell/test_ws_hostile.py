"""``--listen`` against hostile WebSocket clients (loopback sockets, run_listen in-process)."""

from __future__ import annotations

import io
import json
from contextlib import AsyncExitStack

import pytest
import trio
from support.wskit import AcpClient, connect, listening, make_config, upgrade_status, wait_closed

from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.topology import listen as ws_app

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


async def open_tcp(stack: AsyncExitStack, url: str) -> trio.SocketStream:
    """A raw TCP connection to the listener at ``url`` (sending nothing), closed by ``stack``."""
    host, _, port = url.split("/")[2].rpartition(":")
    stream = await trio.open_tcp_stream(host, int(port))
    stack.push_async_callback(stream.aclose)
    return stream


async def closed_by_proxy(stream: trio.SocketStream, seconds: float) -> bool:
    """Whether the proxy closes ``stream`` within ``seconds`` (without sending anything)."""
    with trio.move_on_after(seconds):
        try:
            data = await stream.receive_some()
        except trio.BrokenResourceError:
            return True
        assert data == b""
        return True
    return False


async def upgrade_status_or_none(url: str, path: str = "/acp") -> int | None:
    """The HTTP status of an upgrade request to ``path``; ``None`` if closed unanswered."""
    try:
        return await upgrade_status(url.rsplit("/", 1)[0] + path)
    except (AssertionError, trio.BrokenResourceError):  # closed, or reset (request unread)
        return None


async def polled_status(url: str, retry_on: tuple[int | None, ...]) -> int | None:
    """Repeats upgrade requests while the answer is in ``retry_on``; returns the last one."""
    for _ in range(400):
        if (status := await upgrade_status_or_none(url)) not in retry_on:
            break
        await trio.sleep(0.05)
    return status


async def test_tcp_connections_beyond_the_bound_are_closed_at_once() -> None:
    """Idle TCP connections beyond max_connections + max_pending_handshakes are closed at once."""
    cfg = make_config(max_connections=1, max_pending_handshakes=2)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url, AsyncExitStack() as stack:
            idle = [await open_tcp(stack, url) for _ in range(2)]
            async with connect(url) as ws:  # the third and last place: upgraded
                client = AcpClient(ws)
                sid = await client.start_session()
                for _ in range(3):
                    assert await closed_by_proxy(await open_tcp(stack, url), 2)
                for stream in idle:
                    assert not await closed_by_proxy(stream, 0.3)
                assert (await client.prompt(sid))["result"] == {"stopReason": "end_turn"}


async def test_places_free_when_idle_connections_time_out_or_disconnect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle connections free their places when the handshake times out; then upgrades work."""
    monkeypatch.setattr(ws_app, "HANDSHAKE_TIMEOUT_SECONDS", 0.5)
    cfg = make_config(max_connections=1, max_pending_handshakes=1)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url, AsyncExitStack() as stack:
            idle = [await open_tcp(stack, url) for _ in range(2)]
            assert await closed_by_proxy(await open_tcp(stack, url), 2)
            for stream in idle:
                assert await closed_by_proxy(stream, 5)  # the handshake timeout
                await stream.aclose()
            async with connect(url) as ws:
                await AcpClient(ws).start_session()
                gone = await open_tcp(stack, url)
                await gone.aclose()  # disconnects before the upgrade
                # Its place frees when the proxy closes its socket too; then a
                # new connection gets an HTTP answer again (503: ws is open).
                assert await polled_status(url, retry_on=(None,)) == 503


async def test_rejected_and_dropped_connections_free_their_places() -> None:
    """Rejected upgrades and upgraded connections the client drops free their places."""
    cfg = make_config(max_connections=1, max_pending_handshakes=1)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url:
            for _ in range(5):
                assert await upgrade_status_or_none(url, "/elsewhere") == 404
            for _ in range(5):
                # 101, then the client drops the socket; the place frees once its agent stopped.
                assert await polled_status(url, retry_on=(None, 503)) == 101
