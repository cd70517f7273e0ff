"""JSON-RPC frames over a WebSocket (docs/protocol.md section 1): one message per text frame.

:class:`WebSocketTransport` adapts a trio-websocket ``WebSocketConnection``
(server or client side) to the relay's :class:`FrameTransport`. Open the
connection with ``max_message_size=limits.max_message_bytes``: trio-websocket's
1 MiB default is smaller than ACP's 32 MiB. The proxy's connections are
:mod:`~acp_proxy.shell.transport.ws_bytes` ones, which count that limit in a
text message's UTF-8 bytes (trio-websocket alone counts characters), and the
transport checks the encoded size again.

Peer misbehaviour becomes a report and a close code, never an exception:

========  ===================================================================
1009      a message over the limit, in UTF-8 bytes (the connection closes
          itself, counting bytes; :meth:`receive_batch` reports it as an
          ``Oversize``, so the core audits it)
1003      a binary frame (ACP messages are JSON text; audited here)
1011      no pong within the keepalive timeout (:meth:`keepalive`)
========  ===================================================================
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    ConnectionTimeout,
    HandshakeError,
    WebSocketConnection,
)

from acp_proxy.core.actions import Audit, AuditEvent, Peer
from acp_proxy.core.wire.framing import Oversize
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming
from acp_proxy.shell.transport.ws_bytes import ByteCountingConnection, wrap_client_stream

if TYPE_CHECKING:
    from acp_proxy.shell.relay import AuditSink

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL_ERROR",
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_NORMAL",
    "CLOSE_UNSUPPORTED_DATA",
    "WebSocketTransport",
    "describe_close",
    "open_websocket_client",
]

log = logging.getLogger("acp_proxy.websocket")

#: RFC 6455 section 7.4.1 close codes the proxy uses
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_MESSAGE_TOO_BIG = 1009
CLOSE_INTERNAL_ERROR = 1011

#: how long a close handshake may take before the socket is simply dropped
CLOSE_TIMEOUT_SECONDS = 5.0


def describe_close(reason: CloseReason | None) -> str:
    """``"code 1000 (NORMAL_CLOSURE)"`` plus the peer's reason text, if any."""
    if reason is None:
        return "connection lost"
    text = f"code {reason.code} ({reason.name})"
    return f"{text}: {reason.reason}" if reason.reason else text


class WebSocketTransport(FrameTransport):
    """Frames over one WebSocket connection.

    Args:
        ws: an open connection (opened with ``max_message_size`` set to
            ``max_message_bytes``).
        peer: which side of the proxy the remote end is (names, audit direction).
        max_message_bytes: largest message accepted, in UTF-8 bytes.
        audit: where a refused binary frame is recorded (``None``: not recorded).
    """

    def __init__(
        self,
        ws: WebSocketConnection,
        peer: Peer,
        max_message_bytes: int,
        *,
        audit: AuditSink | None = None,
    ) -> None:
        self.ws = ws
        self.peer = peer
        self.name = peer.value
        self._max = max_message_bytes
        self._audit = audit
        self._ended = False
        #: the close code and reason the proxy sent, if it closed first
        self.closed_by_proxy: CloseReason | None = None
        # trio-websocket's reason text when it closes for an oversize message
        # *it received*; a peer refusing our message names its own limit.
        self._too_big_reason = f"Exceeded maximum message size: {max_message_bytes} bytes"

    @property
    def close_reason(self) -> CloseReason | None:
        """Why the connection closed, ``None`` while open.

        The code the proxy sent if it closed first, else the peer's (1006 when
        the socket dropped without a close frame).
        """
        return self.closed_by_proxy or self.ws.closed

    async def receive_batch(self) -> list[Incoming] | None:
        """The next message as ``[frame]`` (or ``[Oversize]``); ``None`` once closed.

        A text frame's raw newlines (``0x0A``) become tabs (``0x09``), so the
        frame stays one line on a stdio peer without changing the JSON verdict
        on it: outside strings both are JSON whitespace, inside a string both
        are control characters that JSON forbids unescaped. A frame that is
        not one valid JSON text (a raw newline inside a string, several
        messages on several lines) therefore stays invalid, and the core
        refuses it as one message (-32700 to a client, dropped and audited
        from an agent) instead of forwarding a repaired copy.
        """
        if self._ended:
            return None
        try:
            message = await self.ws.get_message()
        except ConnectionClosed as exc:
            self._ended = True
            return self._closed(exc.reason)
        if isinstance(message, bytes):
            self._ended = True
            await self._refuse_binary(len(message))
            return None
        data = message.encode("utf-8")
        if len(data) > self._max:
            return [Oversize(len(data), True)]
        if b"\n" in data:
            data = data.replace(b"\n", b"\t")
        return [data]

    def _closed(self, reason: CloseReason | None) -> list[Incoming] | None:
        if (
            reason is not None
            and reason.code == CLOSE_MESSAGE_TOO_BIG
            and reason.reason == self._too_big_reason
        ):
            log.warning("%s: message over %d bytes; closed with 1009", self.name, self._max)
            return [Oversize(self._max + 1, False)]
        log.info("%s: WebSocket closed, %s", self.name, describe_close(reason))
        return None

    async def _refuse_binary(self, size_bytes: int) -> None:
        reason = f"binary WebSocket frame ({size_bytes} bytes): ACP messages are text frames"
        log.warning("%s sent a %s; closing with 1003", self.name, reason)
        if self._audit is not None:
            self._audit.write(
                Audit(
                    AuditEvent.INVALID_MESSAGE, self.peer.direction, {"reason": f"{reason}; closed"}
                )
            )
        await self.aclose(CLOSE_UNSUPPORTED_DATA, "binary frames are not supported")

    async def send_batch(self, frames: list[bytes]) -> None:
        """Sends each message as one text message, in order.

        A frame holding several messages joined by ``b"\\n"`` is split.

        Raises:
            Closed: the connection is closed or closing.
        """
        for frame in frames:
            # A forwarded run holds several messages joined by newlines (see Send);
            # each is decoded from a view of the run, one at a time: a run is not
            # copied whole (a copy of every queued run would double the queue).
            end = frame.find(b"\n")
            if end < 0:
                await self._send_one(frame)
                continue
            view = memoryview(frame)
            start = 0
            while end >= 0:
                await self._send_one(view[start:end])
                start = end + 1
                end = frame.find(b"\n", start)
            await self._send_one(view[start:])

    async def _send_one(self, message: bytes | memoryview) -> None:
        # Frames the core forwards are JSON, hence UTF-8; "replace" only
        # guards the text-frame rule against a bug elsewhere.
        try:
            if isinstance(self.ws, ByteCountingConnection):  # fragments a long message
                await self.ws.send_text(message)
            else:
                await self.ws.send_message(str(message, "utf-8", "replace"))
        except ConnectionClosed as exc:
            raise Closed(f"{self.name}: send failed, {describe_close(exc.reason)}") from exc

    async def close_write(self) -> None:
        """A WebSocket cannot half-close: closes the connection normally (1000)."""
        await self.aclose()

    async def aclose(self, code: int = CLOSE_NORMAL, reason: str | None = None) -> None:
        """Closes the connection with ``code``; waits at most ``CLOSE_TIMEOUT_SECONDS``.

        Idempotent. After the timeout the socket is dropped without the close
        handshake.
        """
        if self.ws.closed is None and self.closed_by_proxy is None:
            self.closed_by_proxy = CloseReason(code, reason)
        with trio.move_on_after(CLOSE_TIMEOUT_SECONDS):
            await self.ws.aclose(code, reason)

    async def keepalive(self, interval_seconds: float, timeout_seconds: float) -> None:
        """Pings every ``interval_seconds``; closes with 1011 if a pong is late.

        Runs until the connection closes or the task is cancelled; an
        ``interval_seconds`` of 0 returns at once (keepalive off).
        """
        if interval_seconds <= 0:
            return
        while True:
            await trio.sleep(interval_seconds)
            try:
                with trio.move_on_after(timeout_seconds) as scope:
                    await self.ws.ping()
            except ConnectionClosed:
                return
            if scope.cancelled_caught:
                reason = f"no pong within {timeout_seconds:g} s"
                log.warning("%s: %s; closing with 1011", self.name, reason)
                if self._audit is not None:
                    self._audit.write(
                        Audit(AuditEvent.KEEPALIVE_TIMEOUT, self.peer.direction, {"reason": reason})
                    )
                await self.aclose(CLOSE_INTERNAL_ERROR, "keepalive ping timeout")
                return


@asynccontextmanager
async def open_websocket_client(
    host: str,
    port: int,
    resource: str,
    *,
    secure: bool,
    headers: list[tuple[bytes, bytes]],
    max_message_bytes: int,
    connect_timeout_seconds: float,
) -> AsyncIterator[WebSocketConnection]:
    """A client connection (counting its limit in bytes) whose socket is always closed on exit.

    (trio-websocket's ``open_websocket`` leaves the socket open when the server
    closes first or rejects the handshake.) On exit the connection is closed
    (1000) if still open, waiting at most ``CLOSE_TIMEOUT_SECONDS``.

    Raises:
        ConnectionRejected: the server answered the upgrade with an HTTP error.
        HandshakeError: no TCP connection or no handshake answer in time
            (``__cause__`` holds the ``OSError``, if any).
    """
    try:
        with trio.fail_after(connect_timeout_seconds):
            stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
            if secure:
                stream = await trio.open_ssl_over_tcp_stream(
                    host, port, ssl_context=ssl.create_default_context(), https_compatible=True
                )
            else:
                stream = await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        raise ConnectionTimeout from None
    except OSError as exc:
        raise HandshakeError(str(exc)) from exc
    host_header = host if ":" not in host else f"[{host}]"
    if port not in (80, 443):
        host_header = f"{host_header}:{port}"
    try:
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(connect_timeout_seconds) as handshake:
                ws = await wrap_client_stream(
                    nursery,
                    stream,
                    host_header,
                    resource,
                    extra_headers=headers,
                    max_message_size=max_message_bytes,
                )
            if handshake.cancelled_caught:
                raise ConnectionTimeout
            try:
                yield ws
            finally:
                with trio.move_on_after(CLOSE_TIMEOUT_SECONDS):
                    await ws.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The reader task raises ConnectionRejected; hand it out bare.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], HandshakeError):
            raise group.exceptions[0] from None
        raise
    finally:
        await trio.aclose_forcefully(stream)
