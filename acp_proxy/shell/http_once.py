"""One HTTP/1.1 request per connection (trio, h11), for ``--metrics`` and ``acp-proxy view``.

Bounded: the request head is at most ``max_bytes``, and the client has
``timeout_seconds`` to send it and again to read the answer.
"""

from __future__ import annotations

from http import HTTPStatus

import h11
import trio

__all__ = ["host_and_headers", "read_request", "send_response"]


async def read_request(
    stream: trio.SocketStream, conn: h11.Connection, timeout_seconds: float
) -> h11.Request | None:
    """The request read from ``stream``, or ``None`` (closed, malformed or too slow).

    Raises:
        h11.ProtocolError: the client broke HTTP/1.1 (too long a head, ...).
        trio.BrokenResourceError: the connection broke.
    """
    with trio.move_on_after(timeout_seconds):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(4096)
                conn.receive_data(data)
                if not data:
                    return None
            elif isinstance(event, h11.Request):
                return event
            else:
                return None
    return None


def host_and_headers(request: h11.Request) -> tuple[str | None, list[tuple[bytes, bytes]]]:
    """The ``Host`` header's value (``None`` when absent) and the other headers."""
    host = next((v.decode("latin-1") for k, v in request.headers if k == b"host"), None)
    return host, [(k, v) for k, v in request.headers if k != b"host"]


async def send_response(
    stream: trio.SocketStream,
    conn: h11.Connection,
    code: int,
    headers: list[tuple[str, str]],
    body: bytes,
    timeout_seconds: float,
) -> None:
    """Sends a whole response (``content-length`` and ``connection: close`` added).

    Raises:
        trio.BrokenResourceError: the connection broke.
    """
    response = h11.Response(
        status_code=code,
        reason=HTTPStatus(code).phrase,
        headers=[*headers, ("content-length", str(len(body))), ("connection", "close")],
    )
    with trio.move_on_after(timeout_seconds):  # a reader that never reads
        await stream.send_all(
            conn.send(response) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        )
