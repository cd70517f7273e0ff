"""WebSocket URLs, bearer tokens and upgrade checks for ``--listen`` / ``--connect``.

Pure functions (``is_loopback`` may resolve a name), tested without sockets.
Upgrade requests are checked in this order, each failure an HTTP status:
wrong path 404, Origin not allowed 403, bearer token missing or wrong 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

import attrs
import trio

__all__ = ["StartupError", "WsUrl", "check_upgrade", "is_loopback", "parse_ws_url", "read_token"]

_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: fits an HTTP header as is


class StartupError(Exception):
    """A usage or configuration problem found before serving (exit status 2)."""


@attrs.frozen
class WsUrl:
    """A parsed ``ws://`` / ``wss://`` URL.

    Attributes:
        secure: ``wss``.
        host: host name or address, without IPv6 brackets.
        port: TCP port (0 = any, for listening).
        path: the path, ``/`` when empty.
        resource: path plus ``?query``, as sent in the request line.
    """

    secure: bool
    host: str
    port: int
    path: str
    resource: str


def parse_ws_url(url: str, *, default_host: str | None) -> WsUrl:
    """Parses ``ws://HOST:PORT/PATH``.

    Args:
        url: the URL.
        default_host: host when the URL has none (``None``: a host is required).

    Raises:
        StartupError: not a ws/wss URL, no host, or a bad port.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise StartupError(f"{url!r} is not a ws:// or wss:// URL")
    try:
        port = parts.port
    except ValueError as exc:
        raise StartupError(f"{url!r}: bad port ({exc})") from None
    host = parts.hostname or default_host
    if not host:
        raise StartupError(f"{url!r} has no host")
    secure = parts.scheme == "wss"
    path = parts.path or "/"
    resource = f"{path}?{parts.query}" if parts.query else path
    return WsUrl(secure, host, (443 if secure else 80) if port is None else port, path, resource)


def read_token(path: str) -> bytes:
    """The bearer token in ``path`` (surrounding whitespace removed).

    Raises:
        StartupError: unreadable, empty, or not one run of visible ASCII.
    """
    try:
        with open(path, encoding="ascii") as file:
            token = file.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"cannot read token file {path!r}: {exc}") from None
    if not _TOKEN.fullmatch(token):
        raise StartupError(f"token file {path!r} must hold one token of visible ASCII characters")
    return token.encode("ascii")


async def is_loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [v.strip() for k, v in headers if k.lower() == name]


def check_upgrade(
    target: str,
    headers: Sequence[tuple[bytes, bytes]],
    *,
    path: str,
    token: bytes | None,
    allowed_origins: Sequence[str],
) -> tuple[int, str] | None:
    """Decides on an upgrade request (pure).

    Args:
        target: the request target (path and query).
        headers: the request headers.
        path: the path served.
        token: the bearer token required, or ``None``.
        allowed_origins: Origin allow-list; empty allows any. A request without
            an Origin header (not a browser) is not subject to the list.

    Returns:
        ``None`` to accept, else ``(HTTP status, reason)``; the reason never
        contains a header value.
    """
    if urlsplit(target).path != path:
        return 404, "no ACP endpoint at this path"
    origins = _values(headers, b"origin")
    if allowed_origins and origins:
        allowed = {o.rstrip("/").lower() for o in allowed_origins}
        if len(origins) > 1 or origins[0].decode("latin-1").lower() not in allowed:
            return 403, "origin not allowed"
    if token is not None:
        auth = _values(headers, b"authorization")
        scheme, _, given = auth[0].partition(b" ") if len(auth) == 1 else (b"", b"", b"")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), token):
            return 401, "missing or wrong bearer token"
    return None
