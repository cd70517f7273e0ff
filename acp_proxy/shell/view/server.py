"""``acp-proxy view TRACE`` without ``-o``: the page served on a loopback port, following the trace.

A small HTTP/1.1 server on trio and h11 (one request per connection, bounded
request size and time), bound to 127.0.0.1 only: the trace holds what the
proxy saw, so the ``Host`` and ``Origin`` rules of ``--listen``
(:func:`~acp_proxy.shell.topology.ws_upgrade.check_upgrade`) keep other web
pages out (DNS rebinding, cross-site reads). Two paths:

- ``/``: the page (:func:`~acp_proxy.shell.view.page.render_page`) with the
  records written so far;
- ``/records?offset=N``: JSON ``{"records": [...], "offset": M, "unreadable": K}``,
  the whole records written from byte ``N`` on (at most
  :data:`MAX_CHUNK_BYTES` at once), which the page asks for every half second.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11
import trio

from acp_proxy.errors import UsageError
from acp_proxy.shell.http_once import host_and_headers, read_request, send_response
from acp_proxy.shell.topology.ws_upgrade import accepted_hosts, check_upgrade
from acp_proxy.shell.view.page import embed_json, read_records, render_page

__all__ = ["MAX_CHUNK_BYTES", "respond", "serve_view"]

log = logging.getLogger("acp_proxy.view")

#: bytes of one request's head accepted
MAX_REQUEST_BYTES = 16 * 1024
#: seconds a client has to send its request (and to read the answer)
REQUEST_TIMEOUT_SECONDS = 10.0
#: requests served at once; a connection beyond is closed unanswered
MAX_CONNECTIONS = 16
#: bytes of trace read for one ``/records`` answer
MAX_CHUNK_BYTES = 8 * 1024 * 1024

_TEXT = "text/plain; charset=utf-8"


def respond(trace: str, target: str) -> tuple[int, str, bytes]:
    """The answer to ``GET target`` (pure apart from reading ``trace``).

    Returns:
        ``(status, content type, body)``.
    """
    parts = urlsplit(target)
    try:
        if parts.path == "/":
            chunk = read_records(trace)
            page = render_page(chunk, title=os.path.basename(trace), live=True)
            return 200, "text/html; charset=utf-8", page
        if parts.path == "/records":
            values = parse_qs(parts.query).get("offset", ["0"])
            try:
                offset = int(values[0])
            except ValueError:
                offset = -1
            if offset < 0:
                return 400, _TEXT, b"offset must be a byte offset (0, 1, ...)\n"
            if os.path.getsize(trace) < offset:
                return 409, _TEXT, b"the trace was truncated (a new run): reload the page\n"
            chunk = read_records(trace, offset, MAX_CHUNK_BYTES)
            body = (
                b'{"records":'
                + embed_json(chunk.lines)
                + b',"offset":'
                + str(chunk.offset).encode()
                + b',"unreadable":'
                + str(chunk.unreadable).encode()
                + b"}"
            )
            return 200, "application/json", body
    except OSError as exc:
        return 503, _TEXT, f"cannot read the trace: {exc.strerror or exc}\n".encode()
    return 404, _TEXT, b"not found\n"


async def _serve_one(
    stream: trio.SocketStream, trace: str, hosts: frozenset[str] | None, origin: str
) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    request = await read_request(stream, conn, REQUEST_TIMEOUT_SECONDS)
    if request is None:
        return
    target = request.target.decode("latin-1")
    host, headers = host_and_headers(request)
    refusal = check_upgrade(
        target,
        host,
        headers,
        path=urlsplit(target).path,
        token=None,
        allowed_origins=[origin],
        allowed_hosts=hosts,
    )
    if request.method != b"GET":
        code, ctype, body = 405, _TEXT, b"GET only\n"
    elif refusal is not None:
        code, ctype, body = refusal[0], _TEXT, refusal[1].encode() + b"\n"
    else:
        code, ctype, body = await trio.to_thread.run_sync(respond, trace, target)
    answer = [
        ("content-type", ctype),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
    ]
    await send_response(stream, conn, code, answer, body, REQUEST_TIMEOUT_SECONDS)


async def serve_view(
    trace: str,
    port: int = 0,
    *,
    on_ready: Callable[[str], None] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serves the page of ``trace`` on 127.0.0.1 until cancelled.

    Args:
        trace: the trace file (read again on every request, so a growing trace is followed).
        port: the TCP port (0: any free one).
        on_ready: called with the page's URL once listening.
        task_status: ``started`` gets the URL.

    Raises:
        UsageError: the port cannot be bound.
    """
    host = "127.0.0.1"
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise UsageError(
            f"cannot serve the page on {host}:{port}: {exc.strerror or exc}; "
            "pick another --port or 0"
        ) from None
    bound = listeners[0].socket.getsockname()[1]
    url = f"http://{host}:{bound}/"
    origin = f"http://{host}:{bound}"
    hosts = accepted_hosts(host, loopback=True, token=False, allowed_hosts=())
    if on_ready is not None:
        on_ready(url)
    task_status.started(url)
    slots = trio.Semaphore(MAX_CONNECTIONS)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            if slots.value == 0:
                return
            async with slots:
                await _serve_one(stream, trace, hosts, origin)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError, OSError):
            pass
        finally:
            await stream.aclose()

    await trio.serve_listeners(handler, listeners)
