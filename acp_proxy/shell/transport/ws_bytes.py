"""trio-websocket connections whose ``max_message_size`` counts UTF-8 bytes.

trio-websocket bounds a message by ``len()``: characters for a text message.
A text message of 4-byte characters was buffered whole, up to 4x
``limits.max_message_bytes`` on the wire (~11x in memory), before
:meth:`~acp_proxy.shell.transport.websocket.WebSocketTransport.receive_batch`
could refuse it. The proxy's own connections are made with the classes here
instead, which count a text message's UTF-8 bytes, so a message over the limit
in bytes closes with 1009 as soon as the limit is passed:

- :class:`ByteCountingConnection`: a ``WebSocketConnection`` counting bytes;
- :class:`ByteCountingServer`: a ``WebSocketServer`` whose connections are
  :class:`ByteCountingConnection`;
- :func:`wrap_client_stream`: trio-websocket's function of that name, making a
  :class:`ByteCountingConnection`.

:meth:`ByteCountingConnection.send_text` sends a message of more than
:data:`FRAGMENT_BYTES` as fragments (RFC 6455 section 5.4; every peer
reassembles them into the same message): trio-websocket and wsproto make a
``str``, its UTF-8 encoding and the framed copy of the whole message, which
for a 31 MiB message the agent wrote took the proxy to 222 MiB (issue 29).

Nothing here changes trio-websocket itself: other connections in the process
(a test's peer, a library's) keep counting characters.

These override private parts of trio-websocket 0.12
(``WebSocketConnection._handle_message_event`` and ``_message_size``,
``WebSocketServer._handle_connection`` and the attributes it reads, the
connection's ``_reader_task``, ``_get_request`` and ``_open_handshake``), so
``pyproject.toml`` bounds the dependency to ``>=0.12,<0.13``;
``tests/shell/test_ws_bytes.py`` checks the limit on both sides. Upstream,
a ``max_message_size`` in bytes would make this module unnecessary.
"""

from __future__ import annotations

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketServer
from wsproto import ConnectionType, WSConnection
from wsproto.events import BytesMessage, TextMessage

__all__ = ["FRAGMENT_BYTES", "ByteCountingConnection", "ByteCountingServer", "wrap_client_stream"]

#: a text message longer than this (UTF-8 bytes) is sent in fragments of at most this size
FRAGMENT_BYTES = 64 * 1024


class ByteCountingConnection(WebSocketConnection):
    """A WebSocket connection whose ``max_message_size`` is in UTF-8 bytes.

    The message handler adds, for each non-ASCII piece of a text message, its
    UTF-8 bytes beyond one per character before trio-websocket's own count
    and check (``isascii`` is O(1), so ASCII text costs nothing more). Binary
    messages are counted in bytes already.
    """

    async def _handle_message_event(self, event: BytesMessage | TextMessage) -> None:
        data = event.data
        if isinstance(data, str) and not data.isascii():
            self._message_size += len(data.encode("utf-8")) - len(data)
        await super()._handle_message_event(event)

    async def send_text(self, data: bytes | memoryview) -> None:
        """Sends ``data`` (UTF-8 JSON) as one text message, in fragments of at most
        :data:`FRAGMENT_BYTES` bytes cut between characters.

        Invalid UTF-8 (a bug elsewhere: the core forwards JSON) is replaced
        with U+FFFD, as a whole message would be. Control frames (a ping, a
        pong) may go between the fragments; no other message does, as long as
        one task sends the messages (the relay's writer).

        Raises:
            ConnectionClosed: the connection is closed or closing.
        """
        view = memoryview(data)
        size = len(view)
        start = 0
        while True:
            if self._close_reason:
                raise ConnectionClosed(self._close_reason)
            end = min(size, start + FRAGMENT_BYTES)
            for _ in range(3):  # back to the first byte of a character (at most 4 bytes long)
                if end < size and view[end] & 0xC0 == 0x80:
                    end -= 1
            last = end >= size
            text = str(view[start:end], "utf-8", "replace")
            await self._send(TextMessage(data=text, message_finished=last))
            if last:
                return
            start = end


class ByteCountingServer(WebSocketServer):
    """A ``WebSocketServer`` whose connections are :class:`ByteCountingConnection`.

    Same constructor and behaviour as ``WebSocketServer``; only the class of
    the connection it makes differs.
    """

    async def _handle_connection(self, stream: trio.abc.Stream) -> None:
        # trio-websocket 0.12's WebSocketServer._handle_connection, with the
        # connection class replaced.
        async with trio.open_nursery() as nursery:
            connection = ByteCountingConnection(
                stream,
                WSConnection(ConnectionType.SERVER),
                message_queue_size=self._message_queue_size,
                max_message_size=self._max_message_size,
                receive_buffer_size=self._receive_buffer_size,
            )
            nursery.start_soon(connection._reader_task)
            with trio.move_on_after(self._connect_timeout) as connect_scope:
                request = await connection._get_request()
            if connect_scope.cancelled_caught:
                nursery.cancel_scope.cancel()
                await stream.aclose()
                return
            try:
                await self._handler(request)
            finally:
                with trio.move_on_after(self._disconnect_timeout):
                    # aclose() shuts the reader task down even if it is cancelled
                    await connection.aclose()


async def wrap_client_stream(
    nursery: trio.Nursery,
    stream: trio.abc.Stream,
    host: str,
    resource: str,
    *,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    max_message_size: int,
) -> ByteCountingConnection:
    """A client connection over ``stream``, once the opening handshake is done.

    trio-websocket's ``wrap_client_stream`` (default queue and buffer sizes,
    no subprotocols) making a :class:`ByteCountingConnection`.

    Args:
        nursery: where the connection's reader task runs.
        stream: the transport (TCP or TLS) to the server.
        host: the ``Host`` header.
        resource: the request target (``/path?query``).
        extra_headers: more request headers.
        max_message_size: largest message accepted, in UTF-8 bytes.

    Raises:
        ConnectionRejected: the server answered the upgrade with an HTTP error
            (raised in ``nursery``, by the reader task).
    """
    connection = ByteCountingConnection(
        stream,
        WSConnection(ConnectionType.CLIENT),
        host=host,
        path=resource,
        client_extra_headers=extra_headers,
        max_message_size=max_message_size,
    )
    nursery.start_soon(connection._reader_task)
    await connection._open_handshake.wait()
    return connection
