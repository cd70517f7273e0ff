"""The proxy's WebSocket connections count their limit in UTF-8 bytes, and only theirs do.

:mod:`acp_proxy.shell.transport.ws_bytes` over loopback sockets: its server
and client connections close with 1009 on a text message over the limit in
bytes though within it in characters, a message of exactly the limit passes,
and trio-websocket's own classes (a test peer's) keep counting characters,
before and after every ``acp_proxy`` module is imported.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    WebSocketServer,
)

from acp_proxy.shell.transport.websocket import open_websocket_client
from acp_proxy.shell.transport.ws_bytes import ByteCountingConnection, ByteCountingServer

LIMIT = 4096
TIMEOUT = 10
#: 4 UTF-8 bytes, 1 character
WIDE = "\U0001f600"


async def _echo(request: WebSocketRequest, connections: list[WebSocketConnection]) -> None:
    ws = await request.accept()
    connections.append(ws)
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass


@asynccontextmanager
async def echo_server(
    server_class: type[WebSocketServer],
) -> AsyncIterator[tuple[int, list[WebSocketConnection]]]:
    """An echo server of ``server_class`` with a limit of ``LIMIT`` on loopback:
    ``(port, the connections it accepted)``."""
    connections: list[WebSocketConnection] = []
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        server = server_class(
            lambda request: _echo(request, connections),
            listeners,
            handler_nursery=nursery,
            max_message_size=LIMIT,
        )
        await nursery.start(server.run)
        yield listeners[0].socket.getsockname()[1], connections
        nursery.cancel_scope.cancel()


def _client(port: int, max_message_bytes: int) -> AbstractAsyncContextManager[WebSocketConnection]:
    return open_websocket_client(
        "127.0.0.1",
        port,
        "/",
        secure=False,
        headers=[],
        max_message_bytes=max_message_bytes,
        connect_timeout_seconds=TIMEOUT,
    )


async def _round_trip(port: int, text: str) -> str | None:
    """Sends ``text`` with a client whose own limit is far away; ``None`` if it comes
    back, else the close code and reason."""
    async with _client(port, 1 << 20) as ws:
        await ws.send_message(text)
        try:
            echoed = await ws.get_message()
        except ConnectionClosed as exc:
            return f"{exc.reason.code} {exc.reason.reason}"
        assert echoed == text
    return None


#: how the server closes on a message over the limit
TOO_BIG = f"1009 Exceeded maximum message size: {LIMIT} bytes"


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("a" * LIMIT, None),
        ("a" * (LIMIT + 1), TOO_BIG),
        ("\u00e9" * (LIMIT // 2), None),  # LIMIT bytes exactly
        ("a" + "\u00e9" * (LIMIT // 2), TOO_BIG),  # one byte over
        (WIDE * (LIMIT // 4 + 1), TOO_BIG),  # within the limit in characters, 4x in bytes
    ],
    ids=["ascii-at-limit", "ascii-over", "two-byte-at-limit", "two-byte-over", "wide"],
)
async def test_the_server_counts_utf8_bytes(text: str, closed: str | None) -> None:
    """A ByteCountingServer connection passes a message of the limit in bytes and
    closes with 1009 on one byte more, however many characters that is."""
    with trio.fail_after(TIMEOUT):
        async with echo_server(ByteCountingServer) as (port, connections):
            assert await _round_trip(port, text) == closed
    assert [type(c) for c in connections] == [ByteCountingConnection]


async def test_a_plain_trio_websocket_server_still_counts_characters() -> None:
    """The wrapper is not a process-wide patch: trio-websocket's own server, in the same
    process, takes a message within its limit in characters but 4x over in bytes."""
    with trio.fail_after(TIMEOUT):
        async with echo_server(WebSocketServer) as (port, connections):
            assert await _round_trip(port, WIDE * (LIMIT // 4 + 1)) is None
    assert [type(c) for c in connections] == [WebSocketConnection]


@pytest.mark.parametrize(
    ("text", "closed"),
    [(WIDE * (LIMIT // 4), False), (WIDE * (LIMIT // 4) + "a", True)],
    ids=["at-limit", "one-byte-over"],
)
async def test_the_client_counts_utf8_bytes(text: str, closed: bool) -> None:
    """open_websocket_client's connection counts bytes too: an echo of the limit in
    4-byte characters arrives, one byte more closes it with 1009."""
    with trio.fail_after(TIMEOUT):
        async with echo_server(WebSocketServer) as (port, _), _client(port, LIMIT) as ws:
            assert isinstance(ws, ByteCountingConnection)
            await ws.send_message(text)
            if not closed:
                assert await ws.get_message() == text
                return
            with pytest.raises(ConnectionClosed) as caught:
                await ws.get_message()
            assert caught.value.reason.code == 1009


#: Prints, for every class and function of trio_websocket, an identity of each of its members.
_SNAPSHOT = """
import importlib, inspect, pkgutil, sys
import trio_websocket, trio_websocket._impl as impl

def snapshot():
    out = {}
    for name, value in sorted(vars(impl).items()):
        out[name] = id(value)
        if inspect.isclass(value) and value.__module__.startswith("trio_websocket"):
            for member, attr in vars(value).items():
                out[f"{name}.{member}"] = id(attr)
    return out

before = snapshot()
import acp_proxy
names = [m.name for m in pkgutil.walk_packages(acp_proxy.__path__, "acp_proxy.")]
for name in names:
    importlib.import_module(name)
assert "acp_proxy.shell.transport.ws_bytes" in sys.modules
changed = sorted(k for k in before.keys() | snapshot().keys() if before.get(k) != snapshot().get(k))
print(len(names), changed)
"""


def test_importing_acp_proxy_leaves_trio_websocket_unchanged() -> None:
    """Importing every acp_proxy module (in a fresh interpreter) changes no member of
    any trio_websocket class or function."""
    r = subprocess.run(
        [sys.executable, "-c", _SNAPSHOT], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    count, changed = r.stdout.split(" ", 1)
    assert int(count) > 40  # every module was imported
    assert changed.strip() == "[]"
