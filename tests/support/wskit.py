"""WebSocket test kit: the proxy's listener in-process, an ACP client over trio-websocket."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import wsproto
import wsproto.events as wse
from trio_websocket import CloseReason, ConnectionClosed, WebSocketConnection

from acp_proxy.config import Config, LimitsConfig, ListenConfig, ProcessConfig
from acp_proxy.shell.relay import AuditSink
from acp_proxy.shell.topology.listen import run_listen
from acp_proxy.shell.topology.ws_upgrade import parse_ws_url
from acp_proxy.shell.transport.websocket import open_websocket_client

HERE = Path(__file__).resolve().parent
AGENT_CMD = [sys.executable, str(HERE / "peers" / "scripted_agent.py")]
REPO = HERE.parent.parent
#: where the TypeScript SDK is installed for the interop test (see tests/shell/conftest.py)
TS_SDK_CACHE = REPO / ".cache" / "ts-sdk"
TS_WS_CLIENT = HERE / "peers" / "ts_ws_client.mjs"


def make_config(
    *,
    max_message_bytes: int = 1 << 20,
    process: ProcessConfig | None = None,
    **listen: Any,
) -> Config:
    """A config with ``listen`` overrides, a small message limit and a short grace period."""
    return Config(
        limits=LimitsConfig(max_message_bytes=max_message_bytes),
        process=process or ProcessConfig(grace_seconds=2.0, kill_after_seconds=2.0),
        listen=attrs.evolve(ListenConfig(), **listen),
    )


@asynccontextmanager
async def listening(
    cfg: Config,
    url: str = "ws://127.0.0.1:0/acp",
    audit: AuditSink | None = None,
    agent_cmd: list[str] | None = None,
) -> AsyncIterator[str]:
    """Runs ``run_listen`` in a nursery; yields the first listening URL; cancels it after."""
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(partial(run_listen, cfg, url, agent_cmd or AGENT_CMD, audit))
        yield urls[0]
        nursery.cancel_scope.cancel()


def connect(
    url: str, headers: list[tuple[bytes, bytes]] | None = None
) -> AbstractAsyncContextManager[WebSocketConnection]:
    """A trio-websocket client connection to ``url`` that closes its socket on exit."""
    target = parse_ws_url(url, default_host=None)
    return open_websocket_client(
        target.host,
        target.port,
        target.resource,
        secure=False,
        headers=headers or [],
        max_message_bytes=64 << 20,
        connect_timeout_seconds=10,
    )


async def wait_closed(ws: WebSocketConnection) -> CloseReason:
    """Waits for the server to close ``ws`` (no message may come first); returns why."""
    with pytest.raises(ConnectionClosed) as info:
        await ws.get_message()
    reason = info.value.reason
    assert reason is not None
    return reason


def local_url(url: str) -> str:
    """``url`` with a wildcard bind address replaced by 127.0.0.1 (where to connect)."""
    return url.replace("//0.0.0.0:", "//127.0.0.1:")


class AcpClient:
    """JSON-RPC over one message channel, keeping the notifications it receives.

    Args:
        ws: an open WebSocket client connection, or ``None`` when
            ``send_text`` / ``receive_text`` are given.
        send_text: sends one message (default: a text frame on ``ws``).
        receive_text: the next message (default: the next frame on ``ws``).
    """

    def __init__(
        self,
        ws: WebSocketConnection | None,
        send_text: Callable[[str], Awaitable[None]] | None = None,
        receive_text: Callable[[], Awaitable[str | bytes]] | None = None,
    ) -> None:
        if ws is not None:
            send_text, receive_text = ws.send_message, ws.get_message
        assert send_text is not None
        assert receive_text is not None
        self._send_text = send_text
        self._receive_text = receive_text
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0

    async def send(self, obj: dict[str, Any]) -> None:
        """Sends one message."""
        await self._send_text(json.dumps(obj))

    async def receive(self) -> dict[str, Any]:
        """The next message."""
        obj: dict[str, Any] = json.loads(await self._receive_text())
        return obj

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Sends a request; returns its response (result or error), keeping notifications."""
        self._next_id += 1
        rid = self._next_id
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        await self.send(body)
        while True:
            msg = await self.receive()
            if "method" not in msg and msg.get("id") == rid:
                return msg
            assert "id" not in msg, f"unexpected message {msg}"
            self.notifications.append(msg)

    async def start_session(self) -> str:
        """``initialize`` (v1, subagents opted in) and ``session/new``; returns the session id."""
        init = await self.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}},
        )
        assert init["result"]["protocolVersion"] == 1
        new = await self.request("session/new", {"cwd": "/", "mcpServers": []})
        sid: str = new["result"]["sessionId"]
        return sid

    async def prompt(self, session_id: str, text: str = "hi") -> dict[str, Any]:
        """``session/prompt`` with one text block; returns the response."""
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.request("session/prompt", params)


async def wait_for_lines(path: Path, predicate: Any, timeout_seconds: float = 10) -> list[str]:
    """Polls ``path`` until ``predicate(lines)`` holds."""
    apath = trio.Path(path)
    with trio.fail_after(timeout_seconds):
        while True:
            lines = (await apath.read_text()).splitlines() if await apath.exists() else []
            if predicate(lines):
                return lines
            await trio.sleep(0.02)


async def upgrade_status(
    url: str, headers: list[tuple[bytes, bytes]] | None = None, host: str | None = None
) -> int:
    """The HTTP status the server answers an upgrade request with (101 = accepted).

    Raw wsproto over a socket this function owns and closes (trio-websocket's
    client leaves the socket of a rejected handshake open). ``host`` is the
    ``Host`` header sent (default: ``HOST:PORT`` of ``url``).
    """
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    address, _, port = hostport.rpartition(":")
    conn = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    stream = await trio.open_tcp_stream(address, int(port))
    try:
        request = wse.Request(host=host or hostport, target="/" + path, extra_headers=headers or [])
        await stream.send_all(conn.send(request))
        while True:
            data = await stream.receive_some(65536)
            assert data, "connection closed before the handshake answer"
            conn.receive_data(data)
            for event in conn.events():
                if isinstance(event, wse.AcceptConnection):
                    return 101
                if isinstance(event, wse.RejectConnection):
                    return event.status_code
    finally:
        await stream.aclose()


class ProcessPipes:
    """Newline-delimited messages over a subprocess's stdin/stdout.

    Args:
        proc: a process started with piped stdin and stdout.
    """

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._buffer = b""

    async def send_text(self, text: str) -> None:
        """Writes ``text`` and a newline to stdin."""
        await self._stdin.send_all(text.encode() + b"\n")

    async def receive_text(self) -> str:
        """The next line of stdout (without its newline)."""
        while b"\n" not in self._buffer:
            data = await self._stdout.receive_some(65536)
            assert data, f"stdout ended; left over: {self._buffer!r}"
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def close_stdin(self) -> None:
        """Closes the process's stdin (end of the client's stream)."""
        await self._stdin.aclose()
